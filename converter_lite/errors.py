"""The one error type users see, with MindSpore Lite's status codes (errorcode.h)."""
from __future__ import annotations

RET_OK = 0
RET_ERROR = -1
RET_MEMORY_FAILED = -6
RET_NOT_SUPPORT = -7
RET_GRAPH_FILE_ERR = -200
RET_NOT_FIND_OP = -300
RET_INVALID_OP_ATTR = -302
RET_OP_EXECUTE_FAILURE = -303
RET_INFER_ERR = -500
RET_INPUT_PARAM_INVALID = -600

DESCRIPTIONS = {
    RET_OK: "No error occurs.",
    RET_ERROR: "Common error code.",
    RET_MEMORY_FAILED: "Failed to allocate memory.",
    RET_NOT_SUPPORT: "Not supported.",
    RET_GRAPH_FILE_ERR: "Failed to verify graph file.",
    RET_NOT_FIND_OP: "Failed to find operator.",
    RET_INVALID_OP_ATTR: "Invalid operator attribute.",
    RET_OP_EXECUTE_FAILURE: "Failed to execute operator.",
    RET_INFER_ERR: "Failed to infer shape.",
    RET_INPUT_PARAM_INVALID: "Invalid input param by user.",
}


class ConverterError(Exception):
    """A user-facing failure: ``code`` is a MindSpore status code, ``message`` names the file/node/flag at fault."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return self.message

    @property
    def description(self) -> str:
        return DESCRIPTIONS.get(self.code, DESCRIPTIONS[RET_ERROR])
