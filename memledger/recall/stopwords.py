"""Question and function words: what a query asks with rather than what it asks about.

Shared by hybrid's any-word leg (memledger.api.ranked drops them from it: "what", "the"
or "do" would rank every memory that has them) and the rerank stage's query side
(memledger.recall.late keeps only content tokens). One list, so both read a query alike.
"""

from __future__ import annotations

#: dropped from hybrid's any-word leg and from the rerank's query tokens; kept when
#: nothing else is left
STOPWORDS = frozenset("""
a about above after again all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had
has have having he her here hers him his how i if in into is it its itself just me more most
my myself no nor not now of off on once only or other our ours out over own same she should
so some such than that the their theirs them then there these they this those through to
too under until up very was we were what when where which while who whom why will with
would you your yours
""".split())
