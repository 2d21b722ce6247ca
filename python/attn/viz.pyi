import os
from typing import Any, Mapping, Optional, Sequence, Union

def html(att: Mapping[str, Any], path: Union[str, os.PathLike], *,
         tokens: Optional[Sequence[str]] = ..., target: Optional[Sequence[str]] = ...,
         target_out: Optional[Sequence[str]] = ..., title: Optional[str] = ...) -> None: ...
def png(att: Mapping[str, Any], path: Union[str, os.PathLike], kind: str = ..., mode: str = ...,
        layer: int = ..., head: int = ..., query: int = ..., cell: int = ..., values: bool = ...,
        font: Optional[str] = ..., *, tokens: Optional[Sequence[str]] = ...,
        target: Optional[Sequence[str]] = ..., target_out: Optional[Sequence[str]] = ...,
        title: Optional[str] = ...) -> None: ...
