"""The AG-UI protocol layer: the events and their codecs, the verifier, the accumulator, the error
tree, JSON pointers, the JSON Schemas of the events and the ``Agent`` contract.

The bottom layer of the core: it imports nothing else of the project. Public names are re-exported
from :mod:`agui_engine`; the modules here are the places to read.
"""
