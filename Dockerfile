FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY workflows ./workflows
COPY activities ./activities
COPY console ./console
COPY settings.py devserver.py exit_cleanly.py worker.py starter.py ./
RUN pip install --no-cache-dir .
ENV HITL_WORKSPACE=/workspace
CMD ["python", "worker.py"]
