# The worker and the API (docker-compose.yml runs both from this image).
FROM python:3.11-slim
WORKDIR /app
# The locked dependency set first, so a code change does not reinstall it: the core and every
# door (the `all` extra, scripts/lock.sh), so one image serves any configuration.
COPY requirements.lock ./
RUN pip install --no-cache-dir --require-hashes -r requirements.lock
COPY pyproject.toml README.md ./
COPY workflows ./workflows
COPY activities ./activities
COPY hitl ./hitl
COPY worker.py starter.py ./
RUN pip install --no-cache-dir --no-deps . \
    && useradd --create-home --uid 10001 agent \
    && mkdir -p /workspace && chown agent /workspace
USER agent
ENV HITL_WORKSPACE=/workspace PYTHONUNBUFFERED=1
EXPOSE 8000
CMD ["python", "worker.py"]
