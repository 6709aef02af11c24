"""Conversion to and from provider wire formats and peer libraries' formats."""
