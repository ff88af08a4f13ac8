"""The memory loop's old import path: :mod:`synapsedb.memory_loop` under its former name."""

from ._renamed import alias

alias(__name__, "synapsedb.memory_loop")
