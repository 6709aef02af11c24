"""The ``tether`` command line."""


def main() -> None:
    raise SystemExit("the tether CLI is not available yet")
