from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NextIdRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class NextIdResponse(_message.Message):
    __slots__ = ("id", "id_text")
    ID_FIELD_NUMBER: _ClassVar[int]
    ID_TEXT_FIELD_NUMBER: _ClassVar[int]
    id: int
    id_text: str
    def __init__(self, id: _Optional[int] = ..., id_text: _Optional[str] = ...) -> None: ...

class NextIdsRequest(_message.Message):
    __slots__ = ("count",)
    COUNT_FIELD_NUMBER: _ClassVar[int]
    count: int
    def __init__(self, count: _Optional[int] = ...) -> None: ...

class NextIdsResponse(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, ids: _Optional[_Iterable[int]] = ...) -> None: ...

class StreamIdsRequest(_message.Message):
    __slots__ = ("count",)
    COUNT_FIELD_NUMBER: _ClassVar[int]
    count: int
    def __init__(self, count: _Optional[int] = ...) -> None: ...

class IdChunk(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, ids: _Optional[_Iterable[int]] = ...) -> None: ...

class ExplainRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    def __init__(self, id: _Optional[int] = ...) -> None: ...

class ExplainResponse(_message.Message):
    __slots__ = ("id", "id_text", "layout", "fields", "unix_ms", "timestamp", "warning")
    ID_FIELD_NUMBER: _ClassVar[int]
    ID_TEXT_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    WARNING_FIELD_NUMBER: _ClassVar[int]
    id: int
    id_text: str
    layout: str
    fields: _containers.RepeatedCompositeFieldContainer[Field]
    unix_ms: int
    timestamp: str
    warning: str
    def __init__(self, id: _Optional[int] = ..., id_text: _Optional[str] = ..., layout: _Optional[str] = ..., fields: _Optional[_Iterable[_Union[Field, _Mapping]]] = ..., unix_ms: _Optional[int] = ..., timestamp: _Optional[str] = ..., warning: _Optional[str] = ...) -> None: ...

class Field(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: int
    def __init__(self, name: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...

class MakeRequest(_message.Message):
    __slots__ = ("fields",)
    class FieldsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    fields: _containers.ScalarMap[str, int]
    def __init__(self, fields: _Optional[_Mapping[str, int]] = ...) -> None: ...

class MakeResponse(_message.Message):
    __slots__ = ("id", "id_text")
    ID_FIELD_NUMBER: _ClassVar[int]
    ID_TEXT_FIELD_NUMBER: _ClassVar[int]
    id: int
    id_text: str
    def __init__(self, id: _Optional[int] = ..., id_text: _Optional[str] = ...) -> None: ...

class TransTimeRequest(_message.Message):
    __slots__ = ("time",)
    TIME_FIELD_NUMBER: _ClassVar[int]
    time: int
    def __init__(self, time: _Optional[int] = ...) -> None: ...

class TransTimeResponse(_message.Message):
    __slots__ = ("unix_ms", "timestamp")
    UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    unix_ms: int
    timestamp: str
    def __init__(self, unix_ms: _Optional[int] = ..., timestamp: _Optional[str] = ...) -> None: ...

class SegmentRequest(_message.Message):
    __slots__ = ("tag",)
    TAG_FIELD_NUMBER: _ClassVar[int]
    tag: str
    def __init__(self, tag: _Optional[str] = ...) -> None: ...

class SegmentResponse(_message.Message):
    __slots__ = ("number",)
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    number: int
    def __init__(self, number: _Optional[int] = ...) -> None: ...

class SegmentsRequest(_message.Message):
    __slots__ = ("tag", "count")
    TAG_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    tag: str
    count: int
    def __init__(self, tag: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class SegmentsResponse(_message.Message):
    __slots__ = ("numbers",)
    NUMBERS_FIELD_NUMBER: _ClassVar[int]
    numbers: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, numbers: _Optional[_Iterable[int]] = ...) -> None: ...

class SeqNextRequest(_message.Message):
    __slots__ = ("key", "count")
    KEY_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    key: str
    count: int
    def __init__(self, key: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class SeqNextResponse(_message.Message):
    __slots__ = ("first", "last", "first_text", "last_text")
    FIRST_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    FIRST_TEXT_FIELD_NUMBER: _ClassVar[int]
    LAST_TEXT_FIELD_NUMBER: _ClassVar[int]
    first: int
    last: int
    first_text: str
    last_text: str
    def __init__(self, first: _Optional[int] = ..., last: _Optional[int] = ..., first_text: _Optional[str] = ..., last_text: _Optional[str] = ...) -> None: ...

class SeqCurrentRequest(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: str
    def __init__(self, key: _Optional[str] = ...) -> None: ...

class SeqCurrentResponse(_message.Message):
    __slots__ = ("current", "current_text")
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    CURRENT_TEXT_FIELD_NUMBER: _ClassVar[int]
    current: int
    current_text: str
    def __init__(self, current: _Optional[int] = ..., current_text: _Optional[str] = ...) -> None: ...
