"""The error classes the package raises for bad input, in a module of their own so that every
module can raise them without importing another's machinery."""


class ConfigError(ValueError):
    """A DYNAMICCL_* variable or option has a value we do not accept."""


class AgreementError(ConfigError):
    """The ranks of a group do not agree on something that must be the same everywhere."""
