"""The official Elasticsearch Python client (8.x or 9.x) against a tierdex
cluster broker: index creation with shards and replicas, bulk through
helpers.bulk, sorted and highlighted searches, helpers.scan (a scroll),
a point in time paged by search_after, deletes, and the index deleted.
Prints what it saw as JSON for the Rust test to check."""

import json
import sys

from elasticsearch import Elasticsearch, helpers

url, index = sys.argv[1], sys.argv[2]
es = Elasticsearch(url, request_timeout=60)
out = {"client_major": __import__("elasticsearch").__versionstr__.split(".")[0]}
out["ping"] = es.ping()
out["info"] = es.info()["version"]["distribution"]
es.indices.create(
    index=index,
    mappings={
        "properties": {
            "title": {"type": "text"},
            "body": {"type": "text"},
            "tag": {"type": "keyword"},
            "views": {"type": "long"},
        }
    },
    settings={"number_of_shards": 3, "number_of_replicas": 1},
)
words = ["river", "stone", "light", "music", "garden", "winter"]
docs = [
    {
        "_index": index,
        "_id": f"d{i}",
        "_source": {
            "title": f"{words[i % 6]} {words[(i // 6) % 6]}",
            "body": " ".join(words[(i * 7 + j * j) % 6] for j in range(12)),
            "tag": ["art", "science", "travel"][i % 3],
            "views": (i * 37) % 100,
        },
    }
    for i in range(300)
]
ok, errors = helpers.bulk(es, docs, refresh=True, chunk_size=100)
out["bulk_ok"] = ok
out["bulk_errors"] = len(errors)
out["count"] = es.count(index=index)["count"]
r = es.search(
    index=index,
    query={"match": {"body": "river"}},
    sort=[{"views": "desc"}, {"tag": "asc"}],
    size=5,
    highlight={"fields": {"body": {}}, "pre_tags": ["<b>"], "post_tags": ["</b>"]},
)
out["river_total"] = r["hits"]["total"]["value"]
out["sorted_views"] = [h["sort"][0] for h in r["hits"]["hits"]]
out["highlight"] = r["hits"]["hits"][0]["highlight"]["body"][0]
r = es.search(index=index, size=0, aggs={"tags": {"terms": {"field": "tag"}}})
out["tags"] = {b["key"]: b["doc_count"] for b in r["aggregations"]["tags"]["buckets"]}
scanned = [h["_id"] for h in helpers.scan(es, index=index, query={"query": {"match_all": {}}}, size=37)]
out["scan"] = len(scanned)
out["scan_unique"] = len(set(scanned))
pit = es.open_point_in_time(index=index, keep_alive="1m")
seen = []
after = None
while True:
    kw = {"search_after": after} if after else {}
    r = es.search(pit={"id": pit["id"], "keep_alive": "1m"}, sort=[{"views": "asc"}], size=50, **kw)
    hits = r["hits"]["hits"]
    if not hits:
        break
    seen.extend(h["_id"] for h in hits)
    after = hits[-1]["sort"]
out["pit_pages"] = len(seen)
out["pit_unique"] = len(set(seen))
out["pit_closed"] = es.close_point_in_time(id=pit["id"])["num_freed"]
es.delete(index=index, id="d0", refresh=True)
out["after_delete"] = es.count(index=index)["count"]
out["get_d1"] = es.get(index=index, id="d1")["_source"]["tag"]
es.indices.delete(index=index)
out["exists_after"] = bool(es.indices.exists(index=index))
print(json.dumps(out))
