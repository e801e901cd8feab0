"""Drives a running tierdex server with the official elasticsearch-py client
(8.x or 9.x), unmodified, and prints what it answered as one JSON object.

Usage: python elasticsearch_client.py URL INDEX

Only keyword arguments that both major versions take (9.x dropped `body=`).
"""
import json
import sys

import elasticsearch
from elasticsearch import Elasticsearch, helpers
from elasticsearch.exceptions import BadRequestError, NotFoundError

url, index = sys.argv[1], sys.argv[2]
client = Elasticsearch(url, request_timeout=30)
out = {
    "client_major": elasticsearch.__versionstr__.split(".")[0],
    "ping": client.ping(),
    "info": client.info()["name"],
}

r = client.search(index=index, query={"match": {"body": "apple banana"}}, size=5)
out["match_ids"] = [h["_id"] for h in r["hits"]["hits"]]
out["match_total"] = r["hits"]["total"]["value"]
out["match_source"] = r["hits"]["hits"][0]["_source"]["title"] if r["hits"]["hits"] else None

r = client.search(
    index=index,
    query={"bool": {"must": [{"match_phrase": {"body": "apple banana"}}], "must_not": {"match": {"title": "fig"}}}},
    size=3,
    highlight={"fields": {"body": {}}},
)
out["bool_ids"] = [h["_id"] for h in r["hits"]["hits"]]
out["bool_highlight"] = r["hits"]["hits"][0].get("highlight", {}).get("body", [""])[0] if r["hits"]["hits"] else ""

r = client.search(index=index, query={"ids": {"values": ["doc-3", "doc-1", "no-such-id"]}}, size=10)
out["ids_query"] = sorted(h["_id"] for h in r["hits"]["hits"])

r = client.search(index=index, query={"multi_match": {"query": "apple", "fields": ["title", "body"], "type": "most_fields"}}, size=5)
out["most_fields_ids"] = [h["_id"] for h in r["hits"]["hits"]]
r = client.search(index=index, query={"multi_match": {"query": "apple", "fields": ["title", "body"]}}, size=5)
out["best_fields_total"] = r["hits"]["total"]["value"]

out["count"] = client.count(index=index, query={"query_string": {"query": "+cherry -date"}})["count"]
out["uri_ids"] = [h["_id"] for h in client.search(index=index, q="grape", size=2)["hits"]["hits"]]

try:
    client.search(index=index, query={"query_string": {"query": "\"unclosed"}})
    out["bad_query"] = "accepted"
except BadRequestError as e:
    out["bad_query"] = e.meta.status
try:
    client.search(index="no-such-index", query={"match": {"body": "x"}})
    out["bad_index"] = "accepted"
except NotFoundError as e:
    out["bad_index"] = e.meta.status

# The write side: index, bulk, delete, refresh.
try:
    client.indices.create(index=index)
    out["create_existing"] = "accepted"
except BadRequestError as e:
    out["create_existing"] = e.error
out["exists"] = bool(client.indices.exists(index=index))
r = client.index(index=index, id="py-1", document={"title": "kumquat one", "body": "a kumquat in the bowl"}, refresh=True)
out["index_result"] = r["result"]
r = client.index(index=index, document={"title": "kumquat two", "body": "another kumquat"})
out["auto_id"] = r["_id"]
ok, errors = helpers.bulk(
    client,
    [{"_index": index, "_id": f"py-bulk-{i}", "_source": {"title": f"kumquat bulk {i}", "body": "kumquat jam"}} for i in range(50)]
    + [{"_op_type": "delete", "_index": index, "_id": "doc-0"}],
)
out["bulk_ok"] = ok
out["bulk_errors"] = errors
client.indices.refresh(index=index)
out["kumquat_count"] = client.count(index=index, query={"match": {"title": "kumquat"}})["count"]
r = client.delete(index=index, id="py-1", refresh=True)
out["delete_result"] = r["result"]
try:
    client.delete(index=index, id="py-1")
    out["delete_again"] = "accepted"
except NotFoundError as e:
    out["delete_again"] = e.meta.status
out["kumquat_after_delete"] = client.count(index=index, query={"match": {"title": "kumquat"}})["count"]
try:
    client.index(index=index, id="bad", document={"price": 3})
    out["bad_field"] = "accepted"
except BadRequestError as e:
    out["bad_field"] = e.error
# helpers.scan pages with a scroll (sort _doc) and clears it.
client.indices.refresh(index=index)
out["scan_ids"] = sorted(h["_id"] for h in helpers.scan(client, index=index, query={"query": {"match": {"title": "kumquat"}}}, size=7))
r = client.update(index=index, id="py-bulk-1", doc={"body": "kumquat marmalade"}, refresh=True)
out["update_result"] = r["result"]
out["updated_body"] = client.get(index=index, id="py-bulk-1")["_source"]["body"]

print(json.dumps(out))
