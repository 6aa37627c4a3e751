"""The individuals × terms graph out of core, in DuckDB (the second pass of :mod:`toolkit.identifiers.engine`).

Input: the per-batch Parquet files the first pass wrote under ``work/`` (hive-partitioned by batch ``b``)::

    words/b=B/   p (individual), t (batch-local term id), s, e (offsets), d (direct), c (category index, -1: none)
    vocab/b=B/   t, term (the batch's normalised word types)
    cats/b=B/    t, c, n (direct occurrences of term t with category c)
    occ/m=M/b=B/ g1..gM (global term ids), p, pos (global word index): m-gram occurrences (second pass, M >= 2)

What it computes, with the definitions of :mod:`toolkit.identifiers.analysis` (a property test checks that both give
the same tables):

* ``gv``: the global vocabulary, ``gid`` = rank of the term in code-point order (the reference's sorted factorize);
* ``e1``: the graph's unigram edges (gid, individual) with occurrence and direct-occurrence counts;
* ``t1``: per term n_individuals, n_occurrences, n_direct_occurrences; ``c1`` its PII category: the most frequent
  among its direct occurrences, ties going to the category listed first in ``CATEGORIES``;
* per m ≥ 2, ``eM``/``tM``: the m-gram edges and terms, with each term's first occurrence (the reference's order).

DuckDB runs every aggregation and join under ``memory_limit`` and spills to ``temp_directory`` beyond it; the
database itself is a file in the work folder, so no table has to fit in memory either.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from toolkit.identifiers.categories import CATEGORIES


def _glob(work: Path, kind: str) -> str:
    return str(work / kind / "*" / "*.parquet").replace("'", "''")


class GraphStore:
    """A DuckDB database in ``work`` holding the term graph; every method is one or a few SQL statements."""

    def __init__(self, work: Path, *, memory_limit: str, threads: int):
        import duckdb

        self.work = work
        self.con = duckdb.connect(str(work / "graph.duckdb"))
        spill = str(work / "spill").replace("'", "''")
        self.con.execute(f"SET memory_limit = '{memory_limit}'")
        self.con.execute(f"SET threads = {int(threads)}")
        self.con.execute(f"SET temp_directory = '{spill}'")
        self.con.execute("SET preserve_insertion_order = false")
        self.con.execute("SET enable_progress_bar = false")

    def close(self) -> None:
        self.con.close()

    def _src(self, kind: str) -> str:
        return f"read_parquet('{_glob(self.work, kind)}', hive_partitioning = true)"

    def first_duplicate_document(self) -> tuple[int, int] | None:
        """The first repeated doc_id in reading order, as (index of its first, index of its repeat)."""
        rows = self.con.execute(f"SELECT l[1], l[2] FROM (SELECT list(i ORDER BY i) AS l FROM {self._src('docs')} "
                               "GROUP BY doc_id HAVING count(*) > 1) ORDER BY l[2] LIMIT 1").fetchall()
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    # ---- unigrams ---------------------------------------------------------------------------------------------------
    def build_unigrams(self) -> None:
        """``gv``, ``vmap`` (batch, local id → gid), ``e1``, ``t1`` and ``c1``."""
        x = self.con.execute
        x(f"CREATE TABLE gv AS SELECT term, (row_number() OVER (ORDER BY term) - 1)::INTEGER AS gid "
          f"FROM (SELECT DISTINCT term FROM {self._src('vocab')})")
        x(f"CREATE TABLE vmap AS SELECT v.b::INTEGER AS b, v.t, g.gid FROM {self._src('vocab')} v "
          f"JOIN gv g USING (term)")
        x(f"CREATE TABLE e1 AS SELECT m.gid, w.p, count(*)::BIGINT AS n_occ, "
          f"count(*) FILTER (WHERE w.d)::BIGINT AS n_dir FROM {self._src('words')} w "
          f"JOIN vmap m ON m.b = w.b AND m.t = w.t GROUP BY m.gid, w.p")
        x("CREATE TABLE t1 AS SELECT gid, count(*)::BIGINT AS n_ind, sum(n_occ)::BIGINT AS n_occ, "
          "sum(n_dir)::BIGINT AS n_dir FROM e1 GROUP BY gid")
        x(f"CREATE TABLE c1 AS SELECT gid, arg_max(c, n * 16 + (15 - c)) AS c FROM (SELECT m.gid, k.c, "
          f"sum(k.n)::BIGINT AS n FROM {self._src('cats')} k JOIN vmap m ON m.b = k.b AND m.t = k.t "
          f"GROUP BY m.gid, k.c) GROUP BY gid")

    def export_flags(self, k: int) -> None:
        """Per batch: each local term's gid and whether it is an indirect unigram (``flags/b=B/``)."""
        out = str(self.work / "flags").replace("'", "''")
        self.con.execute(f"COPY (SELECT m.b, m.t, m.gid, t1.n_ind < {int(k)} AS ind FROM vmap m JOIN t1 USING (gid)) "
                         f"TO '{out}' (FORMAT parquet, PARTITION_BY (b))")

    def unigram_stats(self, k: int, generic_ratio: float) -> dict[str, int]:
        row = self.con.execute(
            f"SELECT count(*), count(*) FILTER (WHERE {self._direct_sql()}), count(*) FILTER (WHERE n_ind < $k), "
            f"count(*) FILTER (WHERE {self._direct_sql()} OR n_ind < $k), count(*) FILTER (WHERE n_dir > 0), "
            f"coalesce(sum(n_occ) FILTER (WHERE n_ind < $k), 0) FROM t1",
            {"k": int(k), "g": float(generic_ratio)}).fetchall()[0]
        keys = ("n_terms", "n_I_direct", "n_I_indirect", "n_I", "seen_in_spans", "occ_below_k")
        return {key: int(v) for key, v in zip(keys, row)}

    @staticmethod
    def _direct_sql() -> str:
        """The reference's rule: seen in a span, and share outside spans ``1 - n_dir / max(n_occ, 1)`` at most g."""
        return "(n_dir > 0 AND 1.0 - n_dir::DOUBLE / greatest(n_occ, 1) <= $g)"

    def person_unigram_counts(self, k: int) -> tuple[np.ndarray, ...]:
        """Per individual (p): distinct words, distinct direct words, distinct indirect unigrams."""
        t = self.con.sql(
            "SELECT e.p, count(*)::BIGINT AS n_distinct, count(*) FILTER (WHERE e.n_dir > 0)::BIGINT AS n_direct, "
            "count(*) FILTER (WHERE t1.n_ind < $k)::BIGINT AS n_ind FROM e1 e JOIN t1 USING (gid) GROUP BY e.p",
            params={"k": int(k)}).to_arrow_table()
        return tuple(t.column(c).to_numpy() for c in ("p", "n_distinct", "n_direct", "n_ind"))

    # ---- m-grams ----------------------------------------------------------------------------------------------------
    def build_mgrams(self, m: int, k: int) -> None:
        """``eM`` and ``tM`` from ``occ/m=M/``, and the indirect occurrences' starts per batch (``istart/m=M/``)."""
        g = ", ".join(f"g{j}" for j in range(1, m + 1))
        src = self._src(f"occ/m={m}")
        x = self.con.execute
        x(f"CREATE TABLE e{m} AS SELECT {g}, p, count(*)::BIGINT AS n_occ, min(pos) AS first FROM {src} "
          f"GROUP BY {g}, p")
        x(f"CREATE TABLE t{m} AS SELECT {g}, count(*)::BIGINT AS n_ind, sum(n_occ)::BIGINT AS n_occ, "
          f"min(first) AS first FROM e{m} GROUP BY {g}")
        (self.work / "istart").mkdir(exist_ok=True)
        out = str(self.work / "istart" / f"m={m}").replace("'", "''")
        x(f"COPY (SELECT o.b, o.pos FROM {src} o JOIN (SELECT {g} FROM t{m} WHERE n_ind < {int(k)}) USING ({g})) "
          f"TO '{out}' (FORMAT parquet, PARTITION_BY (b))")

    def mgram_stats(self, m: int, k: int) -> tuple[int, int]:
        row = self.con.execute(f"SELECT count(*), count(*) FILTER (WHERE n_ind < $k) FROM t{m}",
                               {"k": int(k)}).fetchall()[0]
        return int(row[0]), int(row[1])

    def person_mgram_counts(self, m: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        g = ", ".join(f"g{j}" for j in range(1, m + 1))
        t = self.con.sql(f"SELECT e.p, count(*)::BIGINT AS n FROM e{m} e JOIN t{m} USING ({g}) "
                         f"WHERE t{m}.n_ind < $k GROUP BY e.p", params={"k": int(k)}).to_arrow_table()
        return t.column("p").to_numpy(), t.column("n").to_numpy()

    # ---- the terms table ----------------------------------------------------------------------------------------
    def term_batches(self, n: int, k: int, generic_ratio: float, rows: int = 1 << 20) -> Iterator[pa.RecordBatch]:
        """The rows of ``terms.parquet``: unigrams in gid order, then each m's terms by first occurrence."""
        cats = "[" + ", ".join(f"'{c}'" for c in CATEGORIES) + "]"
        queries = [(f"SELECT gv.term, 1::SMALLINT AS n, t1.n_ind AS n_individuals, t1.n_occ AS n_occurrences, "
                    f"{self._direct_sql()} AS direct, t1.n_ind < $k AS indirect, t1.n_dir AS n_direct_occurrences, "
                    f"coalesce({cats}[c1.c + 1], '') AS category FROM gv JOIN t1 USING (gid) "
                    f"LEFT JOIN c1 USING (gid) ORDER BY gid", {"k": int(k), "g": float(generic_ratio)})]
        for m in range(2, n + 1):
            joins = " ".join(f"JOIN gv v{j} ON v{j}.gid = t.g{j}" for j in range(1, m + 1))
            words = ", ".join(f"v{j}.term" for j in range(1, m + 1))
            queries.append((f"SELECT concat_ws(' ', {words}) AS term, {m}::SMALLINT AS n, t.n_ind AS n_individuals, "
                            f"t.n_occ AS n_occurrences, false AS direct, t.n_ind < $k AS indirect, "
                            f"0::BIGINT AS n_direct_occurrences, '' AS category FROM t{m} t {joins} ORDER BY t.first",
                            {"k": int(k)}))
        for sql, params in queries:
            yield from self.con.sql(sql, params=params).to_arrow_reader(rows)


__all__ = ["GraphStore"]
