"""The agent-state API's old import path: :mod:`synapsedb.agent_state` under its former name."""

from ._renamed import alias

alias(__name__, "synapsedb.agent_state")
