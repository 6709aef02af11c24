"""The agent runtime: Agent, tools, the run loop, results."""
