"""The RAGraph intermediate representation: typed nodes and edges over networkx."""

# The node kinds passes add must be registered before any JSON that holds them is read.
from ragraph.ir import stages as _stages  # noqa: F401
from ragraph.ir.edges import Condition, Edge, EdgeKind
from ragraph.ir.fanout import Binding
from ragraph.ir.graph import Input, RAGraph
from ragraph.ir.nodes import END, START, Generate, Merge, Node, Retrieve, Sampling, register_node
from ragraph.ir.template import Template
from ragraph.ir.values import GeneratedText, Items, Passage, Passages

__all__ = [
    "END", "START", "Binding", "Condition", "Edge", "EdgeKind", "GeneratedText", "Generate",
    "Input", "Items", "Merge", "Node", "Passage", "Passages", "RAGraph", "Retrieve", "Sampling",
    "Template", "register_node",
]
