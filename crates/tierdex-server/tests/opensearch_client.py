"""Drives a running tierdex server with the official opensearch-py client,
unmodified, and prints what it answered as one JSON object.

Usage: python opensearch_client.py URL INDEX
"""
import json
import sys

from opensearchpy import OpenSearch
from opensearchpy.exceptions import NotFoundError, RequestError

url, index = sys.argv[1], sys.argv[2]
client = OpenSearch(hosts=[url], timeout=30)
out = {"ping": client.ping(), "info": client.info()["name"]}

r = client.search(index=index, body={"query": {"match": {"body": "apple banana"}}, "size": 5})
out["match_ids"] = [h["_id"] for h in r["hits"]["hits"]]
out["match_total"] = r["hits"]["total"]["value"]
out["match_source"] = r["hits"]["hits"][0]["_source"]["title"] if r["hits"]["hits"] else None

r = client.search(
    index=index,
    body={
        "query": {"bool": {"must": [{"match_phrase": {"body": "apple banana"}}], "must_not": {"match": {"title": "fig"}}}},
        "size": 3,
        "highlight": {"fields": {"body": {}}},
    },
)
out["bool_ids"] = [h["_id"] for h in r["hits"]["hits"]]
out["bool_highlight"] = r["hits"]["hits"][0].get("highlight", {}).get("body", [""])[0] if r["hits"]["hits"] else ""

out["count"] = client.count(index=index, body={"query": {"query_string": {"query": "+cherry -date"}}})["count"]
out["uri_ids"] = [h["_id"] for h in client.search(index=index, q="grape", size=2)["hits"]["hits"]]

try:
    client.search(index=index, body={"query": {"query_string": {"query": "\"unclosed"}}})
    out["bad_query"] = "accepted"
except RequestError as e:
    out["bad_query"] = e.status_code
try:
    client.search(index="no-such-index", body={"query": {"match": {"body": "x"}}})
    out["bad_index"] = "accepted"
except NotFoundError as e:
    out["bad_index"] = e.status_code

print(json.dumps(out))
