"""GET /api/v1/knowledge/graph at 5,000 nodes / 20,000 edges, against networkx serialisation of the same graph.

Setup (not measured): a temporary data directory; ``--memories`` memories of one user (the owner of the
benchmark's API key) through ``MemoryStore.add_many``, then a synthetic graph written directly through
:class:`assistant.graph.store.GraphStore` in one transaction: ``--nodes`` nodes with realistic names
(people, places, organisations, topics, events, dates, things), sealed like real ones; ``--edges``
edges between them with preferential attachment (a few hubs, a long tail), relations such as
``lives_in`` / ``works_at`` / ``knows`` / ``related_to``, 1-3 source memories each, 5 % invalidated by
a later edge; created and last-seen times over 60 days and 0-8 recalls each, so retention spreads from
1.0 to far under the 0.1 threshold.

Measured:

* **cold build**: the cached view built from SQLite in this process (``GraphViews.snapshot``: rows
  read, names and relations opened, each node's and edge's JSON written once);
* **first request**: the first ``GET /graph?min_retention=0&include_invalid=true`` of a freshly started
  server (it builds the view), over HTTP;
* **p50 of GET /graph**: ``--requests`` further requests of the whole graph (``min_retention=0`` and
  ``include_invalid=true``: every node and edge) to ``assistant serve`` running in a subprocess on loopback (uvicorn, as a user
  starts it; httpx keep-alive client, time until the whole body is read), and the same with the
  default query (``min_retention`` 0.1: the faded nodes hidden);
* **p50 of networkx**: ``networkx.node_link_data(G)`` + ``json.dumps`` of a MultiDiGraph holding the same
  nodes and edges with the same attributes (built from the first answer, retention included: the
  baseline has nothing to compute), ``--requests`` times in this process, each run right after one of
  the timed requests (alternating, so that both see the same load of a shared machine);
* **render alone**: the view's ``render`` of the same query in this process (what the service
  computes per request; the rest of the request's time is HTTP: uvicorn sending and httpx reading the
  body).

The ratio p50(GET /graph) / p50(networkx) is the issue's figure (target <= 0.25: no per-request
rebuilding or re-serialising). No time is asserted.

    .venv/bin/python benchmarks/graph_api.py [--nodes 5000] [--edges 20000] [--requests 30]
    .venv/bin/python benchmarks/graph_api.py --nodes 60 --edges 200 --requests 3     # seconds
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._served import ServedApp  # noqa: E402

DAY = 86_400.0
FIRST = ("Anna Ben Clara David Elif Farid Greta Hugo Ines Jonas Kai Lena Malik Nora Omar Paula Quentin Rosa Samir "
         "Tara Uwe Vera Wim Xenia Yusuf Zoe Alice Bruno Chiara Dmitri Emma Felix Hanna Ivan Julia Karim Lotte Mateo "
         "Nina Oskar Priya Rafael Sofia Tomas Ursula Viktor Wanda Yara Aiko Bjorn").split()
LAST = ("Berg Costa Dubois Eriksen Fischer Garcia Hansen Ivanova Jensen Kowalski Larsen Moreau Novak Olsen Petrov "
        "Quinn Rossi Schmidt Tanaka Ueda Vogel Weber Yilmaz Zimmermann Almeida Becker Castillo Dahl Ekstrom Fontaine "
        "Gruber Horvat Ibsen Jung Keller Lindqvist Meyer Nakamura Ortiz Popescu").split()
CITIES = ("Berlin Reykjavik Lisbon Porto Vienna Prague Krakow Oslo Bergen Lyon Marseille Turin Naples Seville Valencia "
          "Ghent Utrecht Aarhus Tampere Tallinn Riga Vilnius Ljubljana Zagreb Split Thessaloniki Izmir Tbilisi Kyoto "
          "Osaka Montreal Halifax Oaxaca Cusco Valparaiso Hobart Dunedin Nairobi Accra Marrakesh").split()
PLACE_FORMS = ("{c}", "Old Town {c}", "{c} Harbour", "{c} Central Station", "Lake near {c}", "{c} Botanical Garden")
ORG_FORMS = ("{l} Logistics", "{l} & {l2} Architects", "{c} University", "{c} City Hospital", "{l} Bakery",
             "{c} Football Club", "{l} Software", "{c} Public Library")
TOPIC_A = [
    "sourdough baking", "trail running", "climate policy", "jazz piano", "urban gardening", "sailing",
    "chess openings", "bird watching", "tax returns", "home renovation", "language learning", "film photography",
    "meal prep", "marathon training", "vintage cars", "board games", "beekeeping", "rock climbing", "pottery",
    "night shifts", "job interviews", "wedding planning", "moving house", "sleep problems", "knee surgery"]
TOPIC_Q = ("for beginners", "costs", "schedule", "equipment", "in winter", "with the kids", "club", "course", "plans",
           "notes")
EVENTS = ("birthday party", "wedding", "graduation", "farewell dinner", "concert", "conference talk", "house warming",
          "job interview", "hiking trip", "reunion")
THINGS = ("red bicycle", "old laptop", "blue kayak", "vintage camera", "espresso machine", "camper van",
          "electric guitar", "sewing machine", "standing desk", "telescope")
MONTHS = "January February March April May June July August September October November December".split()
RELATIONS = {"person": [("knows", "person"), ("lives_in", "place"), ("works_at", "organisation"),
                        ("likes", "topic"), ("attended", "event"), ("owns", "thing"), ("visited", "place"),
                        ("married_to", "person"), ("related_to", None)],
             "other": [("related_to", None), ("located_in", "place"), ("about", "topic"), ("on", "date")]}
KIND_SHARE = {"person": 0.42, "place": 0.14, "organisation": 0.12, "topic": 0.2, "event": 0.05, "date": 0.04,
              "thing": 0.03}


def names(count: int, rng: random.Random) -> list[tuple[str, str]]:
    """``count`` distinct (name, kind) pairs in the proportions of KIND_SHARE."""
    made: dict[str, str] = {}
    kinds = list(KIND_SHARE)
    weights = list(KIND_SHARE.values())
    while len(made) < count:
        kind = rng.choices(kinds, weights)[0]
        c, last, last2 = rng.choice(CITIES), rng.choice(LAST), rng.choice(LAST)
        if kind == "person":
            name = f"{rng.choice(FIRST)} {last}"
        elif kind == "place":
            name = rng.choice(PLACE_FORMS).format(c=c)
        elif kind == "organisation":
            name = rng.choice(ORG_FORMS).format(l=last, l2=last2, c=c)
        elif kind == "topic":
            name = f"{rng.choice(TOPIC_A)} {rng.choice(TOPIC_Q)}"
        elif kind == "event":
            name = f"{rng.choice(FIRST)}'s {rng.choice(EVENTS)} in {c}"
        elif kind == "date":
            name = f"{rng.randint(1, 28)} {rng.choice(MONTHS)} {rng.randint(2018, 2026)}"
        else:
            name = f"{rng.choice(FIRST)}'s {rng.choice(THINGS)}"
        if name in made and len(made) > count * 0.9:  # the combinations run short: number the rest
            name = f"{name} {len(made)}"
        made.setdefault(name, kind)
    return list(made.items())


def build_graph(services: Any, user: str, n_nodes: int, n_edges: int, n_memories: int, now: float,
                seed: int = 7) -> dict[str, float]:
    """Write the synthetic graph (see the module docstring); returns how long each part took."""
    from assistant.graph.store import GraphStore
    from assistant.graph.types import NodeKind
    from assistant.memory.records import NewMemory

    rng = random.Random(seed)
    started = time.perf_counter()
    texts = [NewMemory(f"Note {i}: {rng.choice(FIRST)} talked about {rng.choice(TOPIC_A)} in {rng.choice(CITIES)}",
                       f"note {i}") for i in range(n_memories)]
    memories = services.memory.add_many(user, texts)
    seconds_memories = time.perf_counter() - started
    store = GraphStore(services.db, services.sealer)
    started = time.perf_counter()
    pairs = names(n_nodes, rng)
    nodes: list[tuple[str, str]] = []  # (id, kind)
    with services.db.transaction() as db:
        # the notes count as extracted: the server's start-up backfill leaves them (and the graph) alone
        db.executemany("INSERT INTO kg_extracted (memory_id, user_id, extractor, extracted_ts) VALUES (?, ?, ?, ?)",
                       [(m, user, "benchmark", now) for m in memories])
        created_at: list[float] = []
        for name, kind in pairs:
            created = now - rng.uniform(0, 60) * DAY
            nodes.append((store.insert_node(db, user, name, NodeKind(kind), created, 1.0), kind))
            created_at.append(created)
        node_rows = []
        mentions = []
        for (node_id, _), created in zip(nodes, created_at, strict=True):
            recalls = min(8, int(rng.expovariate(0.6)))
            age = rng.expovariate(1 / 4.0) * DAY * (1.5 ** recalls)  # since last seen: the hubs are fresher
            last_seen = max(created, now - age)
            sources = rng.sample(memories, rng.randint(1, 3))
            mentions += [(node_id, m, user) for m in sources]
            node_rows.append((last_seen, len(sources), recalls, 1.5 ** recalls, node_id))
        db.executemany("UPDATE kg_nodes SET last_seen_ts = ?, mention_count = ?, recalls = ?, stability = ? "
                       "WHERE id = ?", node_rows)
        db.executemany("INSERT INTO kg_mentions (node_id, memory_id, user_id) VALUES (?, ?, ?)", mentions)
        by_kind: dict[str, list[int]] = {}
        for i, (_, kind) in enumerate(nodes):
            by_kind.setdefault(kind, []).append(i)
        popularity = np.random.default_rng(seed).pareto(1.2, len(nodes)) + 1.0  # a few hubs, a long tail
        order = list(range(len(nodes)))
        cumulative = {kind: np.cumsum(popularity[pool]).tolist() for kind, pool in by_kind.items()}
        cumulative[""] = np.cumsum(popularity).tolist()
        edges: list[str] = []
        edge_rows = []
        sources_rows = []
        while len(edges) < n_edges:
            s = rng.choices(order, cum_weights=cumulative[""])[0]
            relation, target_kind = rng.choice(RELATIONS["person" if nodes[s][1] == "person" else "other"])
            key = target_kind if target_kind in by_kind else ""
            pool = by_kind[key] if key else order
            o = rng.choices(pool, cum_weights=cumulative[key])[0]
            if o == s:
                continue
            valid = max(created_at[s], created_at[o]) + rng.uniform(0, 2) * DAY
            valid = min(valid, now)
            recalls = min(8, int(rng.expovariate(0.8)))
            edge_id = store.insert_edge(db, user, nodes[s][0], relation, nodes[o][0],
                                        weight=0.5 if relation == "related_to" else 1.0, valid_at=valid, now=valid,
                                        stability=1.5 ** recalls)
            k = rng.randint(1, 3)
            sources_rows += [(edge_id, m) for m in rng.sample(memories, k)]
            weight = (0.5 if relation == "related_to" else 1.0)
            for _ in range(k - 1):
                weight += (1.0 - weight) / 2
            last_seen = min(now, valid + rng.expovariate(1 / 5.0) * DAY)
            edge_rows.append((round(weight, 4), recalls, last_seen, edge_id))
            edges.append(edge_id)
        db.executemany("UPDATE kg_edges SET weight = ?, recalls = ?, last_seen_ts = ? WHERE id = ?", edge_rows)
        db.executemany("INSERT OR IGNORE INTO kg_edge_sources (edge_id, memory_id) VALUES (?, ?)", sources_rows)
        invalid = rng.sample(edges, n_edges // 20)  # 5 % replaced by a later fact
        db.executemany("UPDATE kg_edges SET invalid_ts = min(?, valid_ts + ?), invalidated_by = ? WHERE id = ?",
                       [(now, rng.uniform(1, 20) * DAY, rng.choice(edges), e) for e in invalid])
    return {"memories_s": seconds_memories, "graph_s": time.perf_counter() - started}


def networkx_graph(data: dict) -> Any:
    """A MultiDiGraph with the nodes and edges of a /graph answer and all their attributes."""
    import networkx as nx

    graph = nx.MultiDiGraph()
    for node in data["nodes"]:
        graph.add_node(node["id"], **{k: v for k, v in node.items() if k != "id"})
    for edge in data["edges"]:
        graph.add_edge(edge["source"], edge["target"], key=edge["id"],
                       **{k: v for k, v in edge.items() if k not in ("source", "target")})
    return graph


WHOLE = {"min_retention": 0, "include_invalid": "true"}  # every node and edge


def p50(values: list[float]) -> float:
    return statistics.median(values)


def timed(call: Any, count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return times


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--edges", type=int, default=20000)
    parser.add_argument("--memories", type=int, default=2000, help="source memories the nodes and edges cite")
    parser.add_argument("--requests", type=int, default=30, help="timed requests (and networkx runs)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.nodes > 5000:
        parser.error("--nodes is at most 5000 (knowledge_visualization.max_nodes)")
    os.environ.setdefault("ASSISTANT_TESTING", "1")  # the scripted engine and hashing embedder: no model here
    import networkx as nx

    from assistant.config import Settings
    from assistant.graph.store import GraphStore
    from assistant.graph.view import GraphQuery, GraphViews
    from assistant.security import KeyStore
    from assistant.services import build_services

    with tempfile.TemporaryDirectory(prefix="assistant-graph-api-") as tmp:
        app = ServedApp(Path(tmp), {"memory": {"embedding_backend": "hashing"}})  # makes the key (the owner's)
        settings = Settings.load(app.config, knowledge_graph={"enabled": False})  # no extraction of the notes
        services = build_services(settings)
        try:
            user = str(KeyStore(services.db).owner_user_id())
            now = time.time()
            setup = build_graph(services, user, args.nodes, args.edges, args.memories, now)
            views = GraphViews(GraphStore(services.db, services.sealer))
            started = time.perf_counter()
            snapshot = views.snapshot(user)
            cold_build_ms = (time.perf_counter() - started) * 1000
            whole = GraphQuery(min_retention=0.0, limit=args.nodes, include_invalid=True)
            render_ms = timed(lambda: snapshot.render(whole, time.time()), args.requests)
        finally:
            services.close()
        url = app.url("/api/v1/knowledge/graph")
        with app, httpx.Client(headers=app.headers, timeout=120) as http:
            def get(**query: Any) -> bytes:
                response = http.get(url, params=query)
                response.raise_for_status()
                return response.content

            started = time.perf_counter()
            body = get(**WHOLE)
            first_ms = (time.perf_counter() - started) * 1000
            data = json.loads(body)
            graph = networkx_graph(data)
            nx_size = len(json.dumps(nx.node_link_data(graph, edges="edges")))
            api_ms, nx_ms = [], []
            for _ in range(args.requests):  # alternately: both see the same load of a shared machine
                api_ms += timed(lambda: get(**WHOLE), 1)
                nx_ms += timed(lambda: json.dumps(nx.node_link_data(graph, edges="edges")), 1)
            default = json.loads(get())
            default_ms = timed(get, args.requests)
    report = {
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "server": "assistant serve (uvicorn) in a subprocess on 127.0.0.1; httpx keep-alive client",
        "graph": {"nodes": data["returned_nodes"], "edges": data["returned_edges"], "bytes": len(body),
                  "networkx_bytes": nx_size, "shown_at_default_threshold": default["returned_nodes"],
                  "edges_at_default_threshold": default["returned_edges"]},
        "setup_s": {k: round(v, 2) for k, v in setup.items()},
        "cold_build_ms": round(cold_build_ms, 1),
        "first_request_ms": round(first_ms, 1),
        "p50_render_in_process_ms": round(p50(render_ms), 2),
        "p50_graph_ms": round(p50(api_ms), 2),
        "p90_graph_ms": round(sorted(api_ms)[int(0.9 * (len(api_ms) - 1))], 2),
        "p50_graph_default_query_ms": round(p50(default_ms), 2),
        "p50_networkx_ms": round(p50(nx_ms), 2),
        "ratio": round(p50(api_ms) / p50(nx_ms), 3),
    }
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return report


def print_report(r: dict) -> None:
    g = r["graph"]
    print(f"graph: {g['nodes']} nodes, {g['edges']} edges shown with min_retention=0, include_invalid "
          f"({g['bytes'] / 1e6:.2f} MB "
          f"of JSON; networkx's {g['networkx_bytes'] / 1e6:.2f} MB); at the default threshold "
          f"{g['shown_at_default_threshold']} nodes, {g['edges_at_default_threshold']} edges")
    print(f"setup: memories {r['setup_s']['memories_s']} s, graph {r['setup_s']['graph_s']} s (one transaction)")
    print(f"server: {r['server']}")
    print(f"cold build of the view (in-process, from SQLite): {r['cold_build_ms']} ms")
    print(f"first request (builds the view in the server):   {r['first_request_ms']} ms")
    print(f"the view's render alone (in-process, same query)  p50 {r['p50_render_in_process_ms']} ms")
    print(f"GET /graph?min_retention=0&include_invalid=true   p50 {r['p50_graph_ms']} ms (p90 {r['p90_graph_ms']} ms)")
    print(f"GET /graph (default query)                        p50 {r['p50_graph_default_query_ms']} ms")
    print(f"networkx node_link_data + json.dumps  p50 {r['p50_networkx_ms']} ms")
    print(f"ratio p50(GET /graph) / p50(networkx): {r['ratio']} (target <= 0.25)")
    print(json.dumps(r))


if __name__ == "__main__":
    main()
