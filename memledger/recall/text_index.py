"""The ranked word index: tantivy (BM25, block-max WAND) over committed memories.

SQLite's FTS5 and PostgreSQL's ts_rank rank every posting of every query word before the
top-k cut, so a word that half the memories contain costs a scan of half the table. This
index finds the top k by BM25 while skipping blocks of postings that cannot reach it: a
common word costs about what a rare one does. It is serving data like the vector index:
derived from the projection, never in the app hash, rebuilt when missing or stale.

Files in its folder (HOME/data/recall/text/ for a node): tantivy's own segment files, and
`watermark.json` (format, tokenizer, `indexed_height`, the words and documents added,
whose ratio is the average length `score_unindexed` needs, and `documents`, the count
tantivy held after the commit the watermark follows), written atomically after
tantivy's commit. A crash between the two replays a range: adding a memory first deletes
its id, so nothing is counted twice, and the watermark never claims a height whose
memories are not committed: a failed write drops tantivy's writer (which stores nothing
more after one, silently), and a commit must show every id it added. At open, files
tantivy cannot read, or fewer documents than `documents` (lost files), make the index
start empty, to be rebuilt; more documents are such a crash, and fine.

Documents: `id` (stored, exact) and `body` = content + tags (English stemming and accent
folding, like the projection's full-text index). A query is a boolean query of term
queries for its words' analysed terms: nothing typed reaches tantivy's query parser.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import re
import shutil
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import tantivy

from memledger.durable import write_atomic
from memledger.recall import tantivy_bm25

#: 2: accents folded (ascii_fold), as the projection's `unicode61` full-text index does;
#: 3: words up to MAX_TERM_BYTES kept (2 dropped those over 40 bytes);
#: 4: accents folded before lower-casing ("İstanbul" was held as "i" + a combining dot +
#: "stanbul", so "istanbul" never found it). An index of another format or tokenizer is
#: rebuilt at open
FORMAT = 4
#: The longest word indexed: any a query can hold (512 characters, of up to 4 bytes).
#: tantivy's "en_stem" drops words over 40 bytes, and with them a SHA-256 digest, long
#: identifiers and CJK runs (no spaces: a clause is one word), which the projection's
#: full-text index finds (FTS5 keeps every word; PostgreSQL words up to 2047 bytes).
#: Prose has few such words; a memory of nothing else makes an index about the size of
#: its content (it is bounded by it), where the 40-byte cut made one of ~2%.
MAX_TERM_BYTES = 2048
TOKENIZER = "en_stem_fold"
WRITER_HEAP = 64 << 20
LOCK_FILE = "owner.lock"
#: tantivy's BM25 parameters (term saturation, length normalisation)
BM25_K1 = 1.2
BM25_B = 0.75
_WORD_PIECES = re.compile(r"[^\W_]+")


def _analyzer() -> tantivy.TextAnalyzer:
    """The `body` field's analyzer, registered on the index as TOKENIZER: tantivy's
    "en_stem" (split on non-alphanumerics, lower-case, English stemmer) plus accent
    folding, so "café" and "cafe" are one term, as in the projection's full-text index
    (SQLite's unicode61 removes diacritics), and words up to MAX_TERM_BYTES where
    "en_stem" drops those over 40. Folding comes before lower-casing: lower-casing "İ"
    leaves "i" and a combining dot that folding keeps, so "İstanbul" and "istanbul"
    were two terms; folded first, "İ" is "I", then "i"."""
    return (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
            .filter(tantivy.Filter.remove_long(MAX_TERM_BYTES))
            .filter(tantivy.Filter.ascii_fold())
            .filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.stemmer("english"))
            .build())


#: the same analyzer, to turn a query word into the terms the index holds, so their
#: document frequencies can be read
_EN_STEM = _analyzer()


#: a document's id and the counts of the terms the index would hold for it
WordBag = tuple[str, "Counter[str]"]


def bm25(idf: float, count: Any, length: Any, average: float) -> Any:
    """One term's BM25 share of a document's score, as tantivy weighs it (lengths not
    quantised): `count` occurrences in a document of `length` terms (numbers, or numpy
    arrays of them)."""
    norm = BM25_K1 * (1 - BM25_B + BM25_B * length / average)
    return idf * count * (BM25_K1 + 1) / (count + norm)


def word_bags(docs: Sequence[tuple[str, str]]) -> list[WordBag]:
    """(id, body) documents as the index's analyzer sees them, for `score_unindexed`."""
    return [(memory_id, Counter(_EN_STEM.analyze(body))) for memory_id, body in docs]


def analysed_terms(words: Sequence[str]) -> list[str]:
    """The terms the index holds for a query's words (split, lower-cased, folded, stemmed),
    a piece at a time as typed: tantivy lower-cases as it does for the documents, where
    Python's lower() can split a word ("İ" becomes "i" and a combining dot, two tokens).
    A piece that analyses to nothing is dropped."""
    return [t for piece in query_terms(words) for t in _EN_STEM.analyze(piece)]


def query_terms(words: Sequence[str]) -> list[str]:
    """The letter/digit runs of the query's words (tantivy's tokenizer splits the same
    way, or finer); operators and syntax are dropped here."""
    return [piece for word in words for piece in _WORD_PIECES.findall(word)]


def terms_query(schema: tantivy.Schema, terms: Sequence[str], any_word: bool
                ) -> tantivy.Query:
    """All (or, with `any_word`, any) of the analysed `terms` in `body`, built from term
    queries: nothing the user typed reaches tantivy's query parser, whose syntax it
    could trip (a word it analyses into two tokens becomes a phrase query, which an
    index without positions refuses)."""
    occur = tantivy.Occur.Should if any_word else tantivy.Occur.Must
    return tantivy.Query.boolean_query(
        [(occur, tantivy.Query.term_query(schema, "body", term, index_option="freq"))
         for term in terms])


def _probe(index: tantivy.Index) -> None:
    """Read a little of every segment: its first stored document, and a term from each
    field's dictionary. tantivy opens an index without reading either, so damage inside
    a segment's files showed first as an error in every search. Damage further in is
    found by the search that reads it (`TextIndexer.first_hits`)."""
    searcher = index.searcher()
    for segment in range(int(searcher.num_segments)):
        searcher.doc(tantivy.DocAddress(segment, 0))
    for field in ("id", "body"):
        query = tantivy.Query.term_query(index.schema, field, "the", index_option="basic")
        searcher.search(query, 1, count=False)


class TextIndexBusy(RuntimeError):
    """Another process holds this word index (one writer per folder)."""


class TextIndex:
    """One node's word index. Writes hold `lock` (one writer per folder); searches read
    the last committed view without it."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.lock = threading.RLock()
        self.indexed_height = 0
        #: words and documents added (an estimate: a replayed range counts twice)
        self.words_added = 0
        self.docs_added = 0
        #: documents in the index at the watermark (tantivy's count after the commit the
        #: watermark follows; None: a watermark from before it was kept)
        self.documents: int | None = 0
        self.rebuilt_reason: str | None = None
        self._index: tantivy.Index | None = None
        self._writer: tantivy.IndexWriter | None = None
        self._lock_fd: int | None = None

    # ---------------------------------------------------------------- lifecycle
    @staticmethod
    def _schema() -> tantivy.Schema:
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
        builder.add_text_field("body", stored=False, tokenizer_name=TOKENIZER,
                               index_option="freq")
        return builder.build()

    def open(self) -> str | None:
        """Open the persisted index; returns why it starts empty (to be rebuilt), or None."""
        with self.lock:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._take_folder_lock()
            try:
                return self._open_or_empty()
            except BaseException:
                self._release_folder_lock()  # a later open (or another process) may own it
                raise

    def _open_or_empty(self) -> str | None:
        """The persisted index when it is whole, else an empty one (`open`'s result)."""
        reason = self._stale_reason()
        if reason is None:
            reason = self._open_persisted()
        if reason is not None:
            self._start_empty(reason)
        return reason

    def discard(self, reason: str) -> None:
        """Start empty, to be rebuilt: the index was found damaged while serving."""
        with self.lock:
            self._drop_writer()
            self._start_empty(reason)

    def _start_empty(self, reason: str) -> None:
        """Wipe the folder and open an empty index. Searches under way keep the old view,
        and one starting meanwhile takes it too (the open index is swapped, never unset:
        unset, such a search failed with "not open", a 500, where a damaged view's
        ValueError sends it to the projection)."""
        self._wipe()
        self.indexed_height = self.words_added = self.docs_added = self.documents = 0
        self.rebuilt_reason = reason
        self._index = self._tantivy_index()

    def _tantivy_index(self) -> tantivy.Index:
        """tantivy's index in the folder, with the `body` analyzer registered (tantivy
        keeps only its name in the files: every open must register it)."""
        index = tantivy.Index(self._schema(), path=str(self.folder), reuse=True)
        index.register_tokenizer(TOKENIZER, _analyzer())
        return index

    def _open_persisted(self) -> str | None:
        """Open tantivy's files; why they cannot serve the watermark, or None. A damaged
        segment (a truncated file, one gone) fails tantivy's open: the index is serving
        data, so it is rebuilt rather than taking the node down. Fewer documents than
        the watermark counted means files were lost (tantivy's meta.json gone: tantivy
        then opens an empty index). More is a crash between tantivy's commit and the
        watermark's write, which the replay from the watermark makes good."""
        try:
            index = self._tantivy_index()
            held = int(index.searcher().num_docs)
            _probe(index)
        except ValueError as exc:  # tantivy's error for any damaged or missing file
            return f"unreadable word index: {exc}"
        if self.documents is None:  # a watermark from before the count: none is wrong
            if held == 0 and self.indexed_height > 0:
                return f"word index holds no documents, its watermark is {self.indexed_height}"
            self.documents = held
        elif held < self.documents:
            return (f"word index holds {held} documents, its watermark counted "
                    f"{self.documents}")
        self._index = index
        return None

    def _wipe(self) -> None:
        """Remove everything in the folder but the lock this process holds on it."""
        for entry in self.folder.iterdir():
            if entry.name == LOCK_FILE:
                continue
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()

    def _take_folder_lock(self) -> None:
        """An exclusive lock on the folder for as long as the index is open: a second
        process writing the same tantivy folder would corrupt it."""
        fd = os.open(self.folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise TextIndexBusy(f"{self.folder} is open in another process") from None
        self._lock_fd = fd

    def _release_folder_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _stale_reason(self) -> str | None:
        meta = self.folder / "watermark.json"
        if not meta.exists():
            return "no word index yet"
        try:
            doc = json.loads(meta.read_text())
            if doc.get("format") != FORMAT or doc.get("tokenizer") != TOKENIZER:
                return "word index from another format"
            self.indexed_height = int(doc["indexed_height"])
            self.words_added = int(doc.get("words_added", 0))
            self.docs_added = int(doc.get("docs_added", 0))
            documents = doc.get("documents")
            self.documents = None if documents is None else int(documents)
        except (ValueError, KeyError, TypeError, OSError):
            return "unreadable word index meta"
        return None

    def reset(self) -> None:
        """Empty the index (the projection went back, e.g. it was rebuilt)."""
        with self.lock, self._writing() as writer:
            writer.delete_all_documents()
            writer.commit()
            self.indexed_height = self.words_added = self.docs_added = self.documents = 0
            self._write_meta()
            self._reload()

    def close(self) -> None:
        with self.lock:
            if self._writer is not None:
                with contextlib.suppress(Exception):
                    self._writer.wait_merging_threads()
            self._writer = None
            self._index = None
            self._release_folder_lock()

    # ---------------------------------------------------------------- writes
    def add(self, docs: Sequence[tuple[str, str]], height: int) -> None:
        """Add (id, body) documents and move the watermark to `height`, durably."""
        with self.lock:
            if docs:
                self._commit(docs)
                self.words_added += sum(len(_WORD_PIECES.findall(body)) for _, body in docs)
                self.docs_added += len(docs)
            if height != self.indexed_height:
                self.indexed_height = height
                self._write_meta()

    def _commit(self, docs: Sequence[tuple[str, str]]) -> None:
        """Commit the documents (replacing any of the same ids) and check tantivy holds
        them all before the watermark may pass them."""
        with self._writing() as writer:
            for memory_id, body in docs:
                writer.delete_documents_by_term("id", memory_id)
                writer.add_document(tantivy.Document(id=memory_id, body=body))
            writer.commit()
            self._reload()
            self._check_stored([memory_id for memory_id, _ in docs])
        self.documents = len(self)

    def _check_stored(self, ids: list[str]) -> None:
        """Raise unless every id is a live document: a writer that failed once (a full
        disk) can go on "committing" while storing nothing, and a watermark moved past
        such a commit would leave those memories out of the index for good."""
        index = self._open_index()
        wanted = set(ids)
        query = tantivy.Query.term_set_query(index.schema, "id", sorted(wanted))
        held = len(index.searcher().search(query, len(wanted), count=False).hits)
        if held != len(wanted):
            raise RuntimeError(f"word index commit holds {held} of {len(wanted)} documents")

    @contextlib.contextmanager
    def _writing(self) -> Iterator[tantivy.IndexWriter]:
        """The writer, for one change; dropped if the change fails, so the next change
        takes a new one: after a failed write (a full disk, say) tantivy's writer stores
        nothing more, and says so by no error."""
        writer = self._require_writer()
        try:
            yield writer
        except BaseException:
            self._drop_writer()
            raise

    def _drop_writer(self) -> None:
        """Roll back and release the writer (tantivy's folder lock with it), best effort:
        it may be broken."""
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.rollback()
            with contextlib.suppress(Exception):
                writer.wait_merging_threads()  # consumes the writer: the lock goes too

    def _write_meta(self) -> None:
        write_atomic(self.folder / "watermark.json", json.dumps(
            {"format": FORMAT, "tokenizer": TOKENIZER, "indexed_height": self.indexed_height,
             "words_added": self.words_added, "docs_added": self.docs_added,
             "documents": self.documents}))

    def _reload(self) -> None:
        assert self._index is not None
        self._index.reload()

    def _require_writer(self) -> tantivy.IndexWriter:
        """The writer, made on first write: its threads are then started by (and share
        the lowered priority of) the follower thread that writes, not the opener."""
        index = self._open_index()
        if self._writer is None:
            self._writer = index.writer(heap_size=WRITER_HEAP, num_threads=1)
        return self._writer

    # ---------------------------------------------------------------- reads
    def _open_index(self) -> tantivy.Index:
        """The open index (the one held now: a search keeps it alive if it is closed
        meanwhile)."""
        index = self._index
        if index is None:
            raise RuntimeError("the word index is not open")
        return index

    def search(self, words: Sequence[str], n: int, any_word: bool = False
               ) -> list[tuple[str, float]]:
        """Top `n` (id, BM25 score) for the words: all must match, or any with `any_word`."""
        terms = analysed_terms(words)
        if not terms or n <= 0:
            return []
        # No lock: a searcher is a fixed view of committed segments, so a search never
        # waits for the follower's commit (15-25 ms at 1M) and that commit never waits
        # for searches. An index closed meanwhile stays alive until this view is dropped.
        index = self._open_index()
        query = terms_query(index.schema, terms, any_word)
        searcher = index.searcher()
        # count=False: counting every match would force tantivy to visit every posting,
        # which turns off block-max WAND pruning (13.4 -> 8.1 ms p50 for a word in 97% of
        # 1M memories)
        hits = searcher.search(query, n, count=False).hits
        return [(str(searcher.doc(address)["id"][0]), float(score))
                for score, address in hits]

    def score_unindexed(self, words: Sequence[str], bags: Sequence[WordBag],
                        any_word: bool = False) -> list[tuple[str, float]]:
        """BM25 of documents the index does not hold yet (their `word_bags`), best first:
        the memories of the last block or two, which a search ranks itself beside the
        index's hits rather than wait for the follower's commit (read-your-writes, no wait).

        Each score is the one tantivy gives the document once it holds these documents
        (`tantivy_bm25`: its one-byte lengths, its average length, its precision), so a
        memory keeps its place when it is indexed and a cursor's pages stay slices of one
        list. Serving data only: floats are fine here, nothing of it reaches consensus."""
        index = self._open_index()  # a closed index is an error, even for no terms
        terms = analysed_terms(words)
        if not terms or not bags:
            return []
        searcher = index.searcher()
        view = (str(self.folder), int(searcher.num_docs), int(searcher.num_segments),
                self.indexed_height)
        return tantivy_bm25.score_bags(index, searcher, "body", terms, bags, any_word, view,
                                       self.average_length(bags))

    def average_length(self, bags: Sequence[WordBag] = ()) -> float:
        """The average document length BM25 normalises by, as counted while adding
        (`bags`: the documents not in the index yet, for an index from before the count)."""
        added, counted = self.words_added, self.docs_added
        if not counted:  # an index from before the count: these documents' own average
            added, counted = sum(sum(bag.values()) for _, bag in bags), len(bags)
        return max(added / counted, 1.0) if counted else 1.0

    def idf(self, term: str, bags: Sequence[WordBag] = ()) -> float:
        """BM25's inverse document frequency of an analysed term, counting the index's
        documents and `bags` (documents not in it yet) as tantivy would."""
        index = self._open_index()
        searcher = index.searcher()
        total = int(searcher.num_docs) + len(bags)
        held = int(searcher.doc_freq("body", term)) + sum(term in bag for _, bag in bags)
        return math.log(1 + (total - held + 0.5) / (held + 0.5))

    def doc_freq(self, term: str) -> int:
        """Documents holding an analysed term (deleted ones count until segments merge)."""
        index = self._open_index()
        return int(index.searcher().doc_freq("body", term))

    def top_ids(self, term: str, n: int) -> list[str]:
        """The ids of the `n` best documents for one analysed term, by the index's BM25."""
        index = self._open_index()
        query = tantivy.Query.term_query(index.schema, "body", term, index_option="freq")
        searcher = index.searcher()
        hits = searcher.search(query, n, count=False).hits
        return [str(searcher.doc(address)["id"][0]) for _, address in hits]

    def share_matching(self, word: str) -> tuple[int, int]:
        """(documents holding `word`, documents in the index), from the term dictionary:
        no postings are read. A word of several pieces ("port-5433") counts its rarest
        piece's documents, an upper bound; deleted documents count until segments merge.
        (0, n) for a word with no indexable piece."""
        index = self._open_index()
        searcher = index.searcher()
        terms = _EN_STEM.analyze(word)
        found = min((int(searcher.doc_freq("body", t)) for t in terms), default=0)
        return found, int(searcher.num_docs)

    def __len__(self) -> int:
        with self.lock:
            return 0 if self._index is None else int(self._index.searcher().num_docs)

    def disk_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.folder.glob("*") if f.is_file())
