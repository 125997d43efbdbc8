"""Errors of every pipeline stage, each with the exit code the CLI returns for it.

Exit codes: each class below; 130, 143 and 129 for Ctrl-C, SIGTERM and SIGHUP (``Terminated``); 70 for a bug
(an internal error). A LensError carries a one-line message that names the cause; the CLI prints it as
``error: <message>`` and exits with ``exit_code``, without a traceback unless ``--verbose``.
"""

from __future__ import annotations

import os
import shutil

from .units import format_bytes


def printable(text: str) -> str:
    """``text`` with every non-printable character (control bytes, a corrupt file's binary) escaped as
    Python writes it (``\\x00``, ``\\x1b``, ``\\u2028``), so a message never carries raw bytes to a terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class LensError(Exception):
    """Base class: something the user can act on, reported as one line."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        text = printable(" ".join(self.message.split()))
        return f"{text} ({printable(self.hint)})" if self.hint else text

    def __str__(self) -> str:
        return self.one_line()


class UsageError(LensError):
    """A bad option value: unknown Inductor option, malformed KEY=VALUE, bad shape."""

    exit_code = 2


class ModelFileError(LensError):
    """The model file is missing, does not import, or breaks the get_model/get_inputs contract."""

    exit_code = 3


class ModelRunError(LensError):
    """The model raised while running eagerly (before torch.compile was involved)."""

    exit_code = 4


class CompileError(LensError):
    """torch.compile (Dynamo, AOTAutograd or Inductor) failed, or the compiled model raised."""

    exit_code = 5


class CaptureTimeout(LensError):
    """The child process ran past --timeout and was killed."""

    exit_code = 6


class InputFolderError(LensError):
    """A folder given to `report` holds no debug output this tool can read."""

    exit_code = 7


class ParseError(LensError):
    """Strict parsing met content it does not recognise (tests run strict)."""

    exit_code = 8


class RenderError(LensError):
    """The report could not be written (templates missing, output folder not writable)."""

    exit_code = 9


class KernelCheckError(LensError):
    """A hand-written kernel disagreed with its torch reference, or could not run."""

    exit_code = 10


class DeviceError(LensError):
    """The command needs a device this machine does not have (e.g. `handwritten bench` without CUDA)."""

    exit_code = 11


class NoSpaceError(LensError):
    """A disk the run writes to is full (ENOSPC): the report folder, TMPDIR, the caches. The message names the
    path and the space left on it."""

    exit_code = 13


def no_space_message(path: object, what: str) -> str:
    """``<what>: no space left on the disk of <path> (N MB free of M GB)``: one line, for every full disk."""
    folder = os.path.abspath(str(path))
    while not os.path.exists(folder) and os.path.dirname(folder) != folder:  # a file it could not create
        folder = os.path.dirname(folder)
    try:
        usage = shutil.disk_usage(folder)
        space = f"{format_bytes(usage.free)} free of {format_bytes(usage.total)}"
    except OSError:
        space = "its free space unreadable"
    return f"{what}: no space left on the disk of {path} ({space}); free some space or point it elsewhere"


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP to the tool (a batch scheduler, a closed terminal): handled as Ctrl-C is (the model
    process and what it started are killed, the private caches removed, what was captured kept), then the
    exit code is 128 + the signal's number, as a shell reports it (143, 129; Ctrl-C: 130)."""

    def __init__(self, signal_number: int) -> None:
        super().__init__(signal_number)
        self.signal_number = signal_number


class InUseError(LensError):
    """A folder another inductor-lens run is using: a second run into the same ``--out``, or ``cache clear`` while
    a compile uses the caches. The message names the running one (pid, command, start time)."""

    exit_code = 14
