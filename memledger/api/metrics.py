"""Prometheus metrics of one REST process (its own registry, so apps never collide).

Ledger gauges (height, proposed backlog) are computed at scrape time from the
projection, so they are right even right after a restart and cost nothing between
scrapes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import sqlalchemy as sa
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy.engine import Engine

from memledger.api.db import projection_height
from memledger.projection.schema import memories
from memledger.recall.indexer import Indexer
from memledger.recall.text_indexer import TextIndexer

log = logging.getLogger("memledger.api")


#: methods counted under their own name in the request metrics; any other is "other"
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

class _LedgerCollector(Collector):
    """Block height and the voting backlog, read from the projection per scrape."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[GaugeMetricFamily]:
        height = GaugeMetricFamily("memledger_block_height",
                                   "Last block height flushed into the SQL projection")
        backlog = GaugeMetricFamily("memledger_proposed_backlog",
                                    "Memories in status proposed (awaiting a quorum)")
        oldest = GaugeMetricFamily("memledger_oldest_proposed_age_blocks",
                                   "Age in blocks of the oldest proposed memory (0 if none)")
        up = GaugeMetricFamily("memledger_projection_up",
                               "1 when the projection could be read at scrape time")
        try:
            with self.engine.connect() as conn:
                h = projection_height(conn)
                count, first = conn.execute(
                    sa.select(sa.func.count(), sa.func.min(memories.c.submitted_height))
                    .where(memories.c.status == "proposed")
                ).one()
        except sa.exc.SQLAlchemyError as exc:
            log.warning("metrics: projection unreadable: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        height.add_metric([], h)
        backlog.add_metric([], int(count or 0))
        oldest.add_metric([], max(0, h - int(first)) if first is not None else 0)
        yield from (up, height, backlog, oldest)


class RecallCollector(Collector):
    """The vector index behind recall by meaning: size, memory, disk, watermark, lag."""

    def __init__(self, indexer: Indexer) -> None:
        self.indexer = indexer

    def collect(self) -> Iterator[Metric]:
        st = self.indexer.status()
        for name, doc, value in (
            ("memledger_recall_index_vectors", "Memories in the vector index", st.count),
            ("memledger_recall_index_memory_bytes", "RAM held by the vector index",
             st.memory_bytes),
            ("memledger_recall_index_disk_bytes", "Bytes of the vector index on disk",
             st.disk_bytes),
            ("memledger_recall_indexed_height",
             "Last projection height whose memories are all in the vector index",
             st.indexed_height),
            ("memledger_recall_lag_blocks",
             "Blocks the vector index is behind the SQL projection", st.lag),
            ("memledger_recall_covered_lag_blocks",
             "Blocks whose memories are in neither the vector index nor its tail",
             st.covered_lag),
            ("memledger_recall_tail_memories",
             "Memories above the index's watermark held by its static tail",
             st.tail.memories if st.tail is not None else 0),
        ):
            gauge = GaugeMetricFamily(name, doc)
            gauge.add_metric([], value)
            yield gauge
        asked = CounterMetricFamily(
            "memledger_recall_tail_searches",
            "Searches that asked the static tail for memories the index had not reached")
        asked.add_metric([], self.indexer.tail_searches)
        yield asked


class WordsCollector(Collector):
    """The word index behind ranked text search: documents, disk, watermark, state."""

    def __init__(self, words: TextIndexer) -> None:
        self.words = words

    def collect(self) -> Iterator[GaugeMetricFamily]:
        index = self.words.index
        for name, doc, value in (
            ("memledger_words_index_documents", "Memories in the word index", len(index)),
            ("memledger_words_index_disk_bytes", "Bytes of the word index on disk",
             index.disk_bytes()),
            ("memledger_words_indexed_height",
             "Last projection height whose memories are all in the word index",
             index.indexed_height),
            ("memledger_words_index_serving",
             "1 when ranked text search is served from the word index (0 while it is built)",
             int(self.words.state == "following")),
        ):
            gauge = GaugeMetricFamily(name, doc)
            gauge.add_metric([], value)
            yield gauge


class ApiMetrics:
    """All metrics of one app instance."""

    def __init__(self, engine: Engine) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.tx_submissions = Counter(
            "memledger_tx_submissions_total",
            "Transactions submitted through the REST API, by wait mode and result code",
            ["wait", "code", "name"], registry=self.registry)
        self.requests = Counter(
            "memledger_api_requests_total", "HTTP requests by method, route and status",
            ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram(
            "memledger_api_request_seconds", "HTTP request latency by method and route",
            ["method", "route"], registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
        self.commit_waits = Counter(
            "memledger_api_commit_waits_total",
            "wait=commit answers found in a block, by who found it: the block follower "
            "(per block) or the waiter's own tx lookup (follower down or behind)",
            ["by"], registry=self.registry)
        self.shed_reads = Counter(
            "memledger_api_shed_reads_total",
            "Reads answered 503 overloaded because the read capacity was taken",
            registry=self.registry)
        self.registry.register(_LedgerCollector(engine))

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        # a label per method word a client makes up would be a new series kept forever
        method = method if method in HTTP_METHODS else "other"
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)

    def count_tx(self, wait: str, code: int | str, name: str) -> None:
        self.tx_submissions.labels(wait, str(code), name).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
