"""Adapters for the places agents live (docs/integrations.md): MCP, LangGraph, LangChain,
LlamaIndex. Each is an optional extra (``pip install synapsedb[langgraph]``) and a thin layer
over the public API (:class:`synapsedb.Database` embedded or :class:`synapsedb.client` remote),
imported only by whoever uses it: nothing here is imported by ``synapsedb`` itself."""
