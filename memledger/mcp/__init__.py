"""`memledger mcp`: the ledger as Model Context Protocol tools for agent hosts.

A client of a node's REST API through the SDK (ledger.py), signing locally with one agent
key; tools.py holds the tools, render.py what they print (labelled, within a byte budget),
cursors.py the inbox cursor kept per key on disk, server.py the wiring and transports.
"""
