"""The issue #23 client scenario, with the official elasticsearch-py client
(8.x or 9.x), unmodified, against a tierdex server holding a data directory
with API keys: two indices with mappings, bulk loads, filtered, sorted,
aggregated and highlighted searches, search_after paging, helpers.scan,
update, delete by query, an alias, a snapshot restored under a new name,
deleting an index, and 401/403.

Every answer is checked here against a scan of the documents the script
loaded; the script prints {"ok": true} or the list of what differed.

Usage: python elasticsearch_scenario.py URL ADMIN_ID ADMIN_KEY READER_ID READER_KEY
"""
import json
import sys

import elasticsearch
from elasticsearch import Elasticsearch, helpers
from elasticsearch.exceptions import AuthenticationException, AuthorizationException, NotFoundError

url, admin_id, admin_key, reader_id, reader_key = sys.argv[1:6]
admin = Elasticsearch(url, api_key=(admin_id, admin_key), request_timeout=30)
reader = Elasticsearch(url, api_key=(reader_id, reader_key), request_timeout=30)
anonymous = Elasticsearch(url, request_timeout=30)
failures = []


def check(what, got, want):
    if got != want:
        failures.append({"what": what, "got": got, "want": want})


GENRES = ["drama", "comedy", "horror", "scifi", "noir"]
WORDS = ["night", "city", "river", "ghost", "star", "garden", "storm", "mirror"]


def docs(prefix, n, seed):
    out = []
    for i in range(n):
        x = (i * 7919 + seed) % 1009
        out.append({
            "_id": f"{prefix}{i}",
            "title": " ".join(WORDS[(x + j * j) % len(WORDS)] for j in range(1 + x % 4)),
            "genre": GENRES[x % len(GENRES)],
            "year": 1900 + i,
            "rating": round((x % 100) / 10.0, 1),
        })
    return out


mapping = {"properties": {
    "title": {"type": "text"},
    "genre": {"type": "keyword"},
    "year": {"type": "long"},
    "rating": {"type": "double"},
}}
books, films = docs("b", 200, 3), docs("f", 150, 11)
for name in ["books", "films"]:
    admin.indices.create(index=name, mappings=mapping, settings={"number_of_replicas": 0})
for name, rows in [("books", books), ("films", films)]:
    ok, errors = helpers.bulk(admin, [{"_index": name, "_id": d["_id"], "_source": {k: v for k, v in d.items() if k != "_id"}} for d in rows])
    check(f"bulk {name}", (ok, errors), (len(rows), []))
admin.indices.refresh(index="books,films")
check("cat indices", sorted(r["index"] for r in admin.cat.indices(format="json")), ["books", "films"])

# A filtered, sorted search.
want = sorted((d for d in books if d["genre"] == "scifi" and 1950 <= d["year"] < 2050), key=lambda d: -d["year"])
r = reader.search(index="books", query={"bool": {"filter": [{"term": {"genre": "scifi"}}, {"range": {"year": {"gte": 1950, "lt": 2050}}}]}},
                  sort=[{"year": "desc"}], size=10)
check("filtered sorted ids", [h["_id"] for h in r["hits"]["hits"]], [d["_id"] for d in want[:10]])
check("filtered total", r["hits"]["total"]["value"], len(want))

# Aggregations.
r = reader.search(index="books", size=0, aggs={"genres": {"terms": {"field": "genre"}}, "r": {"stats": {"field": "rating"}}})
counts = {}
for d in books:
    counts[d["genre"]] = counts.get(d["genre"], 0) + 1
check("terms agg", {b["key"]: b["doc_count"] for b in r["aggregations"]["genres"]["buckets"]}, counts)
check("stats agg count", r["aggregations"]["r"]["count"], len(books))
check("stats agg max", r["aggregations"]["r"]["max"], max(d["rating"] for d in books))

# Highlights.
r = reader.search(index="books", query={"match": {"title": "ghost"}}, highlight={"fields": {"title": {}}}, size=100)
want_ids = sorted(d["_id"] for d in books if "ghost" in d["title"].split())
check("match ids", sorted(h["_id"] for h in r["hits"]["hits"]), want_ids)
check("highlights", all("<em>ghost</em>" in h["highlight"]["title"][0] for h in r["hits"]["hits"]), True)

# search_after paging.
want = [d["_id"] for d in sorted((d for d in films if d["rating"] >= 3.0), key=lambda d: d["year"])]
got, after = [], None
while True:
    kw = {"search_after": after} if after else {}
    r = reader.search(index="films", query={"range": {"rating": {"gte": 3.0}}}, sort=[{"year": "asc"}], size=17, **kw)
    hits = r["hits"]["hits"]
    if not hits:
        break
    got += [h["_id"] for h in hits]
    after = hits[-1]["sort"]
check("search_after chain", got, want)

# helpers.scan.
scanned = sorted(h["_id"] for h in helpers.scan(reader, index="films", query={"query": {"term": {"genre": "noir"}}}, size=9))
check("scan", scanned, sorted(d["_id"] for d in films if d["genre"] == "noir"))

# Update and delete by query.
r = admin.update(index="books", id="b5", doc={"rating": 9.9}, refresh=True)
check("update result", r["result"], "updated")
check("updated source", admin.get(index="books", id="b5")["_source"]["rating"], 9.9)
r = admin.delete_by_query(index="films", query={"term": {"genre": "horror"}}, refresh=True)
horror = sum(1 for d in films if d["genre"] == "horror")
check("deleted by query", r["deleted"], horror)
check("count after delete by query", reader.count(index="films")["count"], len(films) - horror)

# An alias.
admin.indices.put_alias(index="books", name="library")
check("alias count", reader.count(index="library", query={"term": {"genre": "drama"}})["count"],
      sum(1 for d in books if d["genre"] == "drama"))
check("alias listed", list(admin.indices.get_alias(name="library").keys()), ["books"])

# Rights: no key is a 401, a reader's write a 403.
try:
    anonymous.search(index="books")
    check("anonymous search", "accepted", 401)
except AuthenticationException as e:
    check("anonymous search", e.meta.status, 401)
try:
    reader.index(index="books", id="x", document={"title": "no"})
    check("reader write", "accepted", 403)
except AuthorizationException as e:
    check("reader write", e.meta.status, 403)
try:
    reader.indices.delete(index="books")
    check("reader delete index", "accepted", 403)
except AuthorizationException as e:
    check("reader delete index", e.meta.status, 403)

# A snapshot of books, restored under a new name, answers as books does;
# a reader may not take one.
admin.snapshot.create_repository(name="backup", repository={"type": "fs", "settings": {"location": "nightly"}})
r = admin.snapshot.create(repository="backup", snapshot="snap-1", indices="books", wait_for_completion=True)
check("snapshot state", r["snapshot"]["state"], "SUCCESS")
check("snapshot indices", r["snapshot"]["indices"], ["books"])
listed = admin.snapshot.get(repository="backup", snapshot="_all")
check("snapshots listed", [x["snapshot"] for x in listed["snapshots"]], ["snap-1"])
r = admin.snapshot.restore(repository="backup", snapshot="snap-1", indices="books", rename_pattern="(.+)",
                           rename_replacement="restored-$1", include_aliases=False, wait_for_completion=True)
check("restored indices", r["snapshot"]["indices"], ["restored-books"])
for q in [{"match": {"title": "ghost star"}}, {"range": {"year": {"gte": 2000}}}]:
    a = reader.search(index="books", query=q, size=50)
    b = reader.search(index="restored-books", query=q, size=50)
    check(f"restored search {q}", [(h["_id"], h["_score"]) for h in b["hits"]["hits"]],
          [(h["_id"], h["_score"]) for h in a["hits"]["hits"]])
    check(f"restored total {q}", b["hits"]["total"], a["hits"]["total"])
try:
    reader.snapshot.create(repository="backup", snapshot="snap-2", wait_for_completion=True)
    check("reader snapshot", "accepted", 403)
except AuthorizationException as e:
    check("reader snapshot", e.meta.status, 403)
check("snapshot deleted", admin.snapshot.delete(repository="backup", snapshot="snap-1")["acknowledged"], True)

# Deleting an index.
admin.indices.delete(index="films")
check("deleted index exists", bool(admin.indices.exists(index="films")), False)
try:
    reader.search(index="films")
    check("search deleted index", "accepted", 404)
except NotFoundError as e:
    check("search deleted index", e.meta.status, 404)

print(json.dumps({"ok": not failures, "failures": failures, "client_major": elasticsearch.__versionstr__.split(".")[0]}))
