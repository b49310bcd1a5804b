"""One exception type for every user-facing failure: the CLI prints its message on one line."""
import sys

EXIT_USER_ERROR = 2


class CampaignError(Exception):
    """A bad input or an impossible request; the message says which, in one line."""


class NoGPUError(CampaignError):
    """A GPU step was asked for on a machine without a usable NVIDIA GPU/driver/PyCUDA."""


class UnknownNameError(CampaignError):
    """A lever, family, suite, quant type, study or run that does not exist."""


class SpaceError(CampaignError):
    """A lever's search space is empty or malformed."""


class StorageError(CampaignError):
    """A study storage or tracking URI that cannot be opened."""


class StudyMismatchError(CampaignError):
    """An existing study that belongs to another lever/suite, or to a newer engine."""


class PromotionRefused(CampaignError):
    """A variant asked to be promoted failed a gate."""


def run_main(main) -> int:
    """A command's exit code, with a CampaignError (no GPU, a bad name, ...) printed as one
    `error:` line instead of a traceback: for the modules and scripts run outside the CLI."""
    try:
        return main()
    except CampaignError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
