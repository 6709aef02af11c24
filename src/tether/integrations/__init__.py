"""tether inside other agent ecosystems: each protocol a subpackage with its own optional extra.

This layer sits below ``tether.agent`` (it builds tools and sessions from the run core and the
stores) and above ``tether.serve`` and ``tether.cli``, which offer its servers to the outside.
"""
