"""LangGraph on SynapseDB (``pip install synapsedb[langgraph]``; docs/integrations/langgraph.md).

- :class:`SynapseStore`: LangGraph's ``BaseStore`` (long-term memory: get/put/delete, search
  with filters and by meaning, list_namespaces, TTL) over a SynapseDB namespace;
- :class:`SynapseSaver`: LangGraph's ``BaseCheckpointSaver`` (threads, checkpoints, pending
  writes) with time travel through SynapseDB's ``as_of`` (``get_tuple_as_of``).

Both take ``synapsedb.open(path)`` or ``synapsedb.connect(url)``.
"""

from __future__ import annotations

from .checkpoint import SynapseSaver
from .store import SynapseStore

__all__ = ["SynapseSaver", "SynapseStore"]
