"""The one exception the kernel's ``check_*`` functions raise."""


class CheckFailed(Exception): ...  # a certificate or claim rejected; the message says where and why
