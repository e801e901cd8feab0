package org.tierdex.bench.lucene;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.facet.FacetsCollector;
import org.apache.lucene.facet.FacetsCollectorManager;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.FieldInfo;
import org.apache.lucene.index.StoredFieldVisitor;
import org.apache.lucene.index.StoredFields;
import org.apache.lucene.queryparser.classic.MultiFieldQueryParser;
import org.apache.lucene.queryparser.classic.ParseException;
import org.apache.lucene.search.FieldDoc;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.Query;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.Sort;
import org.apache.lucene.search.TopDocs;
import org.apache.lucene.search.TopFieldCollectorManager;
import org.apache.lucene.search.TopScoreDocCollectorManager;
import org.apache.lucene.search.TotalHits;
import org.apache.lucene.search.similarities.BM25Similarity;
import org.apache.lucene.store.MMapDirectory;

/**
 * {@code query}: reads {@code MODE<TAB>QUERY} lines from stdin and writes one JSON line each, in
 * input order. With N &gt; 1 threads, a pool evaluates queries concurrently and a writer thread
 * prints the results in input order.
 */
final class Searcher {
  private Searcher() {}

  static final String[] FIELDS = {"title", "body"};

  static int run(String indexArg, int threads) throws Exception {
    Path path = Paths.get(indexArg);
    if (!Files.isDirectory(path)) {
      throw new Main.UsageException("index directory not found: " + indexArg);
    }
    try (MMapDirectory dir = new MMapDirectory(path)) {
      if (!DirectoryReader.indexExists(dir)) {
        throw new Main.UsageException("no Lucene index in " + indexArg);
      }
      try (DirectoryReader reader = DirectoryReader.open(dir)) {
        // No executor: every query runs on the thread that asked (the index has one segment).
        IndexSearcher searcher = new IndexSearcher(reader);
        searcher.setQueryCache(null);
        searcher.setSimilarity(new BM25Similarity());
        Analyzer analyzer = Analysis.analyzer();
        Aggs.Context aggs = new Aggs.Context(reader);
        System.err.printf(
            "lucene query: index=%s docs=%d segments=%d threads=%d (%s)%n",
            path, reader.numDocs(), reader.leaves().size(), threads, Main.versionLine());

        BufferedReader in =
            new BufferedReader(
                new InputStreamReader(new FileInputStream(FileDescriptor.in), StandardCharsets.UTF_8),
                1 << 16);
        Writer out =
            new BufferedWriter(
                new OutputStreamWriter(new FileOutputStream(FileDescriptor.out), StandardCharsets.UTF_8),
                1 << 16);
        if (threads == 1) {
          Worker w = new Worker(searcher, analyzer, aggs);
          String line;
          while ((line = in.readLine()) != null) {
            out.write(w.answer(line));
            out.write('\n');
            out.flush();
          }
        } else {
          concurrent(searcher, analyzer, aggs, threads, in, out);
        }
        out.flush();
      }
    }
    return 0;
  }

  private static final Future<String> DONE = CompletableFuture.completedFuture(null);

  private static void concurrent(
      IndexSearcher searcher,
      Analyzer analyzer,
      Aggs.Context aggs,
      int threads,
      BufferedReader in,
      Writer out)
      throws Exception {
    AtomicInteger ids = new AtomicInteger();
    ExecutorService pool =
        Executors.newFixedThreadPool(
            threads,
            r -> {
              Thread t = new Thread(r, "searcher-" + ids.getAndIncrement());
              t.setDaemon(true);
              return t;
            });
    ThreadLocal<Worker> local = ThreadLocal.withInitial(() -> new Worker(searcher, analyzer, aggs));
    // Bounds the queries in flight; results leave in input order.
    BlockingQueue<Future<String>> pending = new ArrayBlockingQueue<>(8 * threads);
    Thread printer =
        new Thread(
            () -> {
              try {
                while (true) {
                  Future<String> f = pending.take();
                  if (f == DONE) {
                    break;
                  }
                  out.write(f.get());
                  out.write('\n');
                  if (pending.isEmpty()) {
                    out.flush(); // nothing else ready: let a waiting reader see the answer
                  }
                }
                out.flush();
              } catch (Throwable t) {
                System.err.println("error: writing results: " + t);
                System.err.flush();
                Runtime.getRuntime().halt(1);
              }
            },
            "printer");
    printer.start();
    String line;
    while ((line = in.readLine()) != null) {
      String l = line;
      pending.put(pool.submit(() -> local.get().answer(l)));
    }
    pending.put(DONE);
    printer.join();
    pool.shutdown();
  }

  /** Reads only the stored {@code id} of a document (stored first, so the rest is skipped). */
  private static final class IdVisitor extends StoredFieldVisitor {
    String id;

    @Override
    public Status needsField(FieldInfo fieldInfo) {
      if (id != null) {
        return Status.STOP;
      }
      return "id".equals(fieldInfo.name) ? Status.YES : Status.NO;
    }

    @Override
    public void stringField(FieldInfo fieldInfo, String value) {
      id = value;
    }
  }

  /** Per-thread state: query parser and stored-fields reader are not thread-safe. */
  static final class Worker {
    private final IndexSearcher searcher;
    private final MultiFieldQueryParser parser;
    private final StoredFields stored;
    private final IdVisitor visitor = new IdVisitor();
    private final StringBuilder sb = new StringBuilder(1 << 12);
    private final StringBuilder aggJson = new StringBuilder(1 << 12);
    private final Aggs.Context aggContext;

    Worker(IndexSearcher searcher, Analyzer analyzer, Aggs.Context aggContext) {
      this.searcher = searcher;
      this.aggContext = aggContext;
      this.parser = new MultiFieldQueryParser(FIELDS, analyzer);
      this.parser.setDefaultOperator(MultiFieldQueryParser.OR_OPERATOR);
      try {
        this.stored = searcher.storedFields();
      } catch (IOException e) {
        throw new RuntimeException(e);
      }
    }

    /** One JSON line (without newline) for one input line; never throws. */
    String answer(String line) {
      try {
        return evaluate(line);
      } catch (Throwable t) {
        return Json.error("internal error: " + t);
      }
    }

    private String evaluate(String line) throws IOException {
      int end = line.length();
      if (end > 0 && line.charAt(end - 1) == '\r') {
        end--;
      }
      int tab = line.indexOf('\t');
      if (tab < 0 || tab >= end) {
        return Json.error("expected MODE<TAB>QUERY");
      }
      String mode = line.substring(0, tab);
      String text = line.substring(tab + 1, end);
      int k;
      boolean counted;
      switch (mode) {
        case "TOP_10" -> {
          k = 10;
          counted = false;
        }
        case "TOP_100" -> {
          k = 100;
          counted = false;
        }
        case "TOP_1000" -> {
          k = 1000;
          counted = false;
        }
        case "TOP_10_COUNT" -> {
          k = 10;
          counted = true;
        }
        case "COUNT" -> {
          k = 0;
          counted = true;
        }
        default -> {
          return Json.error("unknown mode '" + mode + "'");
        }
      }

      long t0 = System.nanoTime();
      Query query;
      Sort sort = null;
      Aggs aggs = null;
      if (isJson(text)) {
        try {
          JsonQuery q = JsonQuery.parse(text, parser);
          query = q.query;
          sort = q.sort;
          aggs = q.aggs;
        } catch (JsonQuery.BadQuery e) {
          return Json.error("bad query: " + e.getMessage());
        }
      } else {
        try {
          query = parser.parse(text);
        } catch (ParseException | RuntimeException e) {
          return Json.error("cannot parse query: " + firstLine(e.getMessage()));
        }
      }
      TopDocs top = null;
      long count = -1;
      aggJson.setLength(0);
      try {
        if (aggs != null) {
          if (sort != null) {
            return Json.error("bad query: `aggs` with a `sort` is not supported");
          }
          // Every match is collected for the facets: the top hits come from the same pass.
          FacetsCollectorManager fcm = new FacetsCollectorManager();
          FacetsCollector fc;
          if (k == 0) {
            fc = searcher.search(query, fcm);
          } else {
            FacetsCollectorManager.FacetsResult r = FacetsCollectorManager.search(searcher, query, k, fcm);
            top = r.topDocs();
            fc = r.facetsCollector();
          }
          count = 0;
          for (FacetsCollector.MatchingDocs md : fc.getMatchingDocs()) {
            count += md.totalHits();
          }
          aggs.answer(aggJson, aggContext, fc);
        } else if (k == 0) {
          count = searcher.count(query);
        } else if (counted) {
          top =
              sort == null
                  ? searcher.search(query, new TopScoreDocCollectorManager(k, null, Integer.MAX_VALUE))
                  : searcher.search(
                      query, new TopFieldCollectorManager(sort, k, null, Integer.MAX_VALUE));
          if (top.totalHits.relation() != TotalHits.Relation.EQUAL_TO) {
            throw new IllegalStateException("total hit count is not exact: " + top.totalHits);
          }
          count = top.totalHits.value();
        } else {
          // Threshold k: Lucene may skip non-competitive documents (block-max WAND / MaxScore,
          // or the points of a sort field) as soon as k hits are collected.
          top =
              sort == null
                  ? searcher.search(query, new TopScoreDocCollectorManager(k, null, k))
                  : searcher.search(query, new TopFieldCollectorManager(sort, k, null, k));
        }
      } catch (RuntimeException e) {
        return Json.error("search failed: " + firstLine(String.valueOf(e)));
      }
      long elapsedUs = (System.nanoTime() - t0) / 1000;

      StringBuilder b = sb;
      b.setLength(0);
      b.append("{\"count\":");
      if (counted) {
        b.append(count);
      } else {
        b.append("null");
      }
      b.append(",\"hits\":[");
      if (top != null) {
        ScoreDoc[] docs = top.scoreDocs;
        for (int i = 0; i < docs.length; i++) {
          if (i > 0) {
            b.append(',');
          }
          visitor.id = null;
          stored.document(docs[i].doc, visitor);
          b.append("{\"id\":");
          Json.string(b, visitor.id == null ? "" : visitor.id);
          b.append(",\"score\":");
          if (sort == null) {
            Json.number(b, docs[i].score);
          } else {
            // Scores are not computed for field sorts (a `_score` key is in the sort values).
            b.append("null,\"sort\":[");
            Object[] values = ((FieldDoc) docs[i]).fields;
            for (int j = 0; j < values.length; j++) {
              if (j > 0) {
                b.append(',');
              }
              JsonQuery.sortValue(b, values[j]);
            }
            b.append(']');
          }
          b.append('}');
        }
      }
      b.append("],\"elapsed_us\":").append(elapsedUs);
      if (aggs != null) {
        b.append(",\"aggregations\":").append(aggJson);
      }
      b.append('}');
      return b.toString();
    }
  }

  /** Whether a query is a structured (JSON) one: its first non-blank character is '{'. */
  static boolean isJson(String text) {
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c != ' ' && c != '\t') {
        return c == '{';
      }
    }
    return false;
  }

  private static String firstLine(String s) {
    if (s == null) {
      return "unknown error";
    }
    int nl = s.indexOf('\n');
    return (nl < 0 ? s : s.substring(0, nl)).strip();
  }
}
