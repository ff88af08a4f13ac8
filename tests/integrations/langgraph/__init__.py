"""LangGraph store and checkpointer on SynapseDB (issue 15)."""
