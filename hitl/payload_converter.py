"""One pydantic payload converter per process, not one per workflow activation.

The SDK builds a data converter for every workflow activation (the workflow's
serialization context), and with it a new instance of the payload converter
class. `PydanticPayloadConverter` builds a serializer and an empty TypeAdapter
cache in its constructor, so every activation paid for both and decoded each
result type with an adapter made afresh. The converter holds no state of a
workflow or a context (its JSON converter takes none), so one instance serves
them all: `SharedPydanticPayloadConverter()` is that instance, made once.
"""

from __future__ import annotations

import threading
from typing import Any

from temporalio.contrib.pydantic import PydanticPayloadConverter


class SharedPydanticPayloadConverter(PydanticPayloadConverter):
    _instance: SharedPydanticPayloadConverter | None = None
    _lock = threading.Lock()

    def __new__(cls, *args: Any, **kwargs: Any) -> SharedPydanticPayloadConverter:
        if cls._instance is None:
            with cls._lock:
                if cls._instance is None:
                    instance = super().__new__(cls)
                    PydanticPayloadConverter.__init__(instance)
                    cls._instance = instance
        return cls._instance

    def __init__(self) -> None:  # made once, in __new__
        pass
