"""The exception tree. The CLI turns every MailmortemError into one line and exit 1."""


class MailmortemError(Exception):
    """Anything a user can act on: the message names the problem."""

    exit_code = 1


class InputError(MailmortemError):
    """A file or stream that cannot be read as asked (missing, binary, bad gzip...)."""


class ParseError(InputError):
    """A line that is not a record, raised only under --strict."""

    def __init__(self, path: str, line: int, reason: str):
        super().__init__(f"{path}:{line}: {reason}")
        self.path, self.line, self.reason = path, line, reason


class ConfigError(MailmortemError):
    """A bad option value, field mapping or config file."""


class DatabaseError(MailmortemError):
    """A database that cannot be reached or used; messages never carry passwords."""
