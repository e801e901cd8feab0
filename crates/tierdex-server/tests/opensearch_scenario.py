"""The issue #23 client scenario, with the official opensearch-py client,
unmodified (API keys sent as an `Authorization: ApiKey` header), against a tierdex server holding a data directory
with API keys: two indices with mappings, bulk loads, filtered, sorted,
aggregated and highlighted searches, search_after paging, helpers.scan,
update, delete by query, an alias, deleting an index, and 401/403.

Every answer is checked here against a scan of the documents the script
loaded; the script prints {"ok": true} or the list of what differed.

Usage: python opensearch_scenario.py URL ADMIN_ID ADMIN_KEY READER_ID READER_KEY
"""
import json
import sys

import base64

import opensearchpy
from opensearchpy import OpenSearch, helpers
from opensearchpy.exceptions import AuthenticationException, AuthorizationException, NotFoundError

url, admin_id, admin_key, reader_id, reader_key = sys.argv[1:6]


def client(key_id=None, key=None):
    headers = {}
    if key_id:
        headers["Authorization"] = "ApiKey " + base64.b64encode(f"{key_id}:{key}".encode()).decode()
    return OpenSearch(hosts=[url], headers=headers, timeout=30)


admin, reader, anonymous = client(admin_id, admin_key), client(reader_id, reader_key), client()
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
    admin.indices.create(index=name, body={"mappings": mapping, "settings": {"number_of_replicas": 0}})
for name, rows in [("books", books), ("films", films)]:
    ok, errors = helpers.bulk(admin, [{"_index": name, "_id": d["_id"], "_source": {k: v for k, v in d.items() if k != "_id"}} for d in rows])
    check(f"bulk {name}", (ok, errors), (len(rows), []))
admin.indices.refresh(index="books,films")
check("cat indices", sorted(r["index"] for r in admin.cat.indices(format="json")), ["books", "films"])

# A filtered, sorted search.
want = sorted((d for d in books if d["genre"] == "scifi" and 1950 <= d["year"] < 2050), key=lambda d: -d["year"])
r = reader.search(index="books", body={"query": {"bool": {"filter": [{"term": {"genre": "scifi"}}, {"range": {"year": {"gte": 1950, "lt": 2050}}}]}},
                  "sort": [{"year": "desc"}], "size": 10})
check("filtered sorted ids", [h["_id"] for h in r["hits"]["hits"]], [d["_id"] for d in want[:10]])
check("filtered total", r["hits"]["total"]["value"], len(want))

# Aggregations.
r = reader.search(index="books", body={"size": 0, "aggs": {"genres": {"terms": {"field": "genre"}}, "r": {"stats": {"field": "rating"}}}})
counts = {}
for d in books:
    counts[d["genre"]] = counts.get(d["genre"], 0) + 1
check("terms agg", {b["key"]: b["doc_count"] for b in r["aggregations"]["genres"]["buckets"]}, counts)
check("stats agg count", r["aggregations"]["r"]["count"], len(books))
check("stats agg max", r["aggregations"]["r"]["max"], max(d["rating"] for d in books))

# Highlights.
r = reader.search(index="books", body={"query": {"match": {"title": "ghost"}}, "highlight": {"fields": {"title": {}}}, "size": 100})
want_ids = sorted(d["_id"] for d in books if "ghost" in d["title"].split())
check("match ids", sorted(h["_id"] for h in r["hits"]["hits"]), want_ids)
check("highlights", all("<em>ghost</em>" in h["highlight"]["title"][0] for h in r["hits"]["hits"]), True)

# search_after paging.
want = [d["_id"] for d in sorted((d for d in films if d["rating"] >= 3.0), key=lambda d: d["year"])]
got, after = [], None
while True:
    body = {"query": {"range": {"rating": {"gte": 3.0}}}, "sort": [{"year": "asc"}], "size": 17}
    if after:
        body["search_after"] = after
    r = reader.search(index="films", body=body)
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
r = admin.update(index="books", id="b5", body={"doc": {"rating": 9.9}}, refresh=True)
check("update result", r["result"], "updated")
check("updated source", admin.get(index="books", id="b5")["_source"]["rating"], 9.9)
r = admin.delete_by_query(index="films", body={"query": {"term": {"genre": "horror"}}}, refresh=True)
horror = sum(1 for d in films if d["genre"] == "horror")
check("deleted by query", r["deleted"], horror)
check("count after delete by query", reader.count(index="films")["count"], len(films) - horror)

# An alias.
admin.indices.put_alias(index="books", name="library")
check("alias count", reader.count(index="library", body={"query": {"term": {"genre": "drama"}}})["count"],
      sum(1 for d in books if d["genre"] == "drama"))
check("alias listed", list(admin.indices.get_alias(name="library").keys()), ["books"])

# Rights: no key is a 401, a reader's write a 403.
try:
    anonymous.search(index="books")
    check("anonymous search", "accepted", 401)
except AuthenticationException as e:
    check("anonymous search", e.status_code, 401)
try:
    reader.index(index="books", id="x", body={"title": "no"})
    check("reader write", "accepted", 403)
except AuthorizationException as e:
    check("reader write", e.status_code, 403)
try:
    reader.indices.delete(index="books")
    check("reader delete index", "accepted", 403)
except AuthorizationException as e:
    check("reader delete index", e.status_code, 403)

# Deleting an index.
admin.indices.delete(index="films")
check("deleted index exists", bool(admin.indices.exists(index="films")), False)
try:
    reader.search(index="films")
    check("search deleted index", "accepted", 404)
except NotFoundError as e:
    check("search deleted index", e.status_code, 404)

print(json.dumps({"ok": not failures, "failures": failures, "client": opensearchpy.__versionstr__}))
