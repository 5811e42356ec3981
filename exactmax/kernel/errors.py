"""The one exception the kernel's ``check_*`` functions raise."""


class CheckFailed(Exception):
    """A certificate or claim was rejected by the kernel; the message says where and why."""
