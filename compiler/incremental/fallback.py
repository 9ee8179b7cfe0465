"""Why an update cannot keep the old program: the incremental path gives up and a full compile runs."""


class Fallback(Exception):
    """Raised inside the incremental path with the reason (in words) a full compile is needed.

    Not a :class:`~compiler.base.errors.P4subError`: the user did nothing wrong, the update is only
    slower (and may need a new program, which the result then says)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
