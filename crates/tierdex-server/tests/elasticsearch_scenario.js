// The issue #23 client scenario with the official Node client
// (@elastic/elasticsearch), unmodified, against a tierdex server holding a
// data directory with API keys: two indices with mappings, bulk loads,
// filtered, sorted, aggregated and highlighted searches, search_after
// paging, the scroll helper, update, delete by query, an alias, deleting an
// index, and 401/403. Every answer is checked against a scan of the
// documents loaded; prints {"ok": true} or what differed.
//
// Usage: node elasticsearch_scenario.js MODULE_DIR URL ADMIN_ID ADMIN_KEY READER_ID READER_KEY
'use strict'
const [moduleDir, url, adminId, adminKey, readerId, readerKey] = process.argv.slice(2)
const { Client, errors } = require(require('path').join(moduleDir, 'node_modules', '@elastic', 'elasticsearch'))
const version = require(require('path').join(moduleDir, 'node_modules', '@elastic', 'elasticsearch', 'package.json')).version

const admin = new Client({ node: url, auth: { apiKey: { id: adminId, api_key: adminKey } } })
const reader = new Client({ node: url, auth: { apiKey: { id: readerId, api_key: readerKey } } })
const anonymous = new Client({ node: url })
const failures = []
const check = (what, got, want) => {
  if (JSON.stringify(got) !== JSON.stringify(want)) failures.push({ what, got, want })
}

const GENRES = ['drama', 'comedy', 'horror', 'scifi', 'noir']
const WORDS = ['night', 'city', 'river', 'ghost', 'star', 'garden', 'storm', 'mirror']
const docs = (prefix, n, seed) => Array.from({ length: n }, (_, i) => {
  const x = (i * 7919 + seed) % 1009
  return {
    id: `${prefix}${i}`,
    source: {
      title: Array.from({ length: 1 + x % 4 }, (_, j) => WORDS[(x + j * j) % WORDS.length]).join(' '),
      genre: GENRES[x % GENRES.length],
      year: 1900 + i,
      rating: Math.round(x % 100) / 10
    }
  }
})

async function status (f) {
  try {
    await f()
    return 'accepted'
  } catch (e) {
    if (e instanceof errors.ResponseError) return e.meta.statusCode
    throw e
  }
}

async function main () {
  const mappings = { properties: { title: { type: 'text' }, genre: { type: 'keyword' }, year: { type: 'long' }, rating: { type: 'double' } } }
  const books = docs('b', 200, 3)
  const films = docs('f', 150, 11)
  for (const index of ['books', 'films']) {
    await admin.indices.create({ index, mappings, settings: { number_of_replicas: 0 } })
  }
  for (const [index, rows] of [['books', books], ['films', films]]) {
    const byYear = new Map(rows.map(d => [d.source.year, d.id]))
    const r = await admin.helpers.bulk({
      datasource: rows.map(d => d.source),
      onDocument: (doc) => ({ index: { _index: index, _id: byYear.get(doc.year) } })
    })
    check(`bulk ${index}`, [r.successful, r.failed], [rows.length, 0])
  }
  await admin.indices.refresh({ index: 'books,films' })
  check('cat indices', (await admin.cat.indices({ format: 'json' })).map(r => r.index).sort(), ['books', 'films'])

  let want = books.filter(d => d.source.genre === 'scifi' && d.source.year >= 1950 && d.source.year < 2050)
    .sort((a, b) => b.source.year - a.source.year)
  let r = await reader.search({
    index: 'books',
    query: { bool: { filter: [{ term: { genre: 'scifi' } }, { range: { year: { gte: 1950, lt: 2050 } } }] } },
    sort: [{ year: 'desc' }],
    size: 10
  })
  check('filtered sorted ids', r.hits.hits.map(h => h._id), want.slice(0, 10).map(d => d.id))
  check('filtered total', r.hits.total.value, want.length)

  r = await reader.search({ index: 'books', size: 0, aggs: { genres: { terms: { field: 'genre' } }, r: { stats: { field: 'rating' } } } })
  const counts = {}
  for (const d of books) counts[d.source.genre] = (counts[d.source.genre] || 0) + 1
  const got = {}
  for (const b of r.aggregations.genres.buckets) got[b.key] = b.doc_count
  check('terms agg', Object.keys(got).sort().map(k => [k, got[k]]), Object.keys(counts).sort().map(k => [k, counts[k]]))
  check('stats agg count', r.aggregations.r.count, books.length)
  check('stats agg max', r.aggregations.r.max, Math.max(...books.map(d => d.source.rating)))

  r = await reader.search({ index: 'books', query: { match: { title: 'ghost' } }, highlight: { fields: { title: {} } }, size: 100 })
  check('match ids', r.hits.hits.map(h => h._id).sort(), books.filter(d => d.source.title.split(' ').includes('ghost')).map(d => d.id).sort())
  check('highlights', r.hits.hits.every(h => h.highlight.title[0].includes('<em>ghost</em>')), true)

  want = films.filter(d => d.source.rating >= 3).sort((a, b) => a.source.year - b.source.year).map(d => d.id)
  const chain = []
  let after = null
  for (;;) {
    const page = await reader.search({
      index: 'films', query: { range: { rating: { gte: 3 } } }, sort: [{ year: 'asc' }], size: 17, ...(after ? { search_after: after } : {})
    })
    if (page.hits.hits.length === 0) break
    chain.push(...page.hits.hits.map(h => h._id))
    after = page.hits.hits[page.hits.hits.length - 1].sort
  }
  check('search_after chain', chain, want)

  const scanned = []
  for await (const hit of reader.helpers.scrollSearch({ index: 'films', query: { term: { genre: 'noir' } }, size: 9 })) {
    scanned.push(...hit.body.hits.hits.map(h => h._id))
  }
  check('scroll helper', scanned.sort(), films.filter(d => d.source.genre === 'noir').map(d => d.id).sort())

  r = await admin.update({ index: 'books', id: 'b5', doc: { rating: 9.9 }, refresh: true })
  check('update result', r.result, 'updated')
  check('updated source', (await admin.get({ index: 'books', id: 'b5' }))._source.rating, 9.9)
  r = await admin.deleteByQuery({ index: 'films', query: { term: { genre: 'horror' } }, refresh: true })
  const horror = films.filter(d => d.source.genre === 'horror').length
  check('deleted by query', r.deleted, horror)
  check('count after delete by query', (await reader.count({ index: 'films' })).count, films.length - horror)

  await admin.indices.putAlias({ index: 'books', name: 'library' })
  check('alias count', (await reader.count({ index: 'library', query: { term: { genre: 'drama' } } })).count,
    books.filter(d => d.source.genre === 'drama').length)
  check('alias listed', Object.keys(await admin.indices.getAlias({ name: 'library' })), ['books'])

  check('anonymous search', await status(() => anonymous.search({ index: 'books' })), 401)
  check('reader write', await status(() => reader.index({ index: 'books', id: 'x', document: { title: 'no' } })), 403)
  check('reader delete index', await status(() => reader.indices.delete({ index: 'books' })), 403)

  await admin.snapshot.createRepository({ name: 'backup', repository: { type: 'fs', settings: { location: 'nightly' } } })
  r = await admin.snapshot.create({ repository: 'backup', snapshot: 'snap-1', indices: 'books', wait_for_completion: true })
  check('snapshot state', r.snapshot.state, 'SUCCESS')
  r = await admin.snapshot.restore({
    repository: 'backup', snapshot: 'snap-1', indices: 'books', rename_pattern: '(.+)',
    rename_replacement: 'restored-$1', include_aliases: false, wait_for_completion: true
  })
  check('restored indices', r.snapshot.indices, ['restored-books'])
  for (const q of [{ match: { title: 'ghost star' } }, { range: { year: { gte: 2000 } } }]) {
    const a = await reader.search({ index: 'books', query: q, size: 50 })
    const b = await reader.search({ index: 'restored-books', query: q, size: 50 })
    check('restored search ' + JSON.stringify(q), b.hits.hits.map(h => [h._id, h._score]), a.hits.hits.map(h => [h._id, h._score]))
  }
  check('reader snapshot', await status(() => reader.snapshot.create({ repository: 'backup', snapshot: 'snap-2' })), 403)
  check('snapshot deleted', (await admin.snapshot.delete({ repository: 'backup', snapshot: 'snap-1' })).acknowledged, true)

  await admin.indices.delete({ index: 'films' })
  check('deleted index exists', await admin.indices.exists({ index: 'films' }), false)
  check('search deleted index', await status(() => reader.search({ index: 'films' })), 404)

  console.log(JSON.stringify({ ok: failures.length === 0, failures, version }))
}

main().catch(e => {
  console.log(JSON.stringify({ ok: false, failures: [{ what: 'exception', got: String(e && e.stack ? e.stack : e), want: null }], version }))
})
