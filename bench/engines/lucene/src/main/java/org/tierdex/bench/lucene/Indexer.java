package org.tierdex.bench.lucene;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;
import java.util.stream.Stream;
import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.document.Field;
import org.apache.lucene.document.FieldType;
import org.apache.lucene.document.StringField;
import org.apache.lucene.index.CodecReader;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.IndexOptions;
import org.apache.lucene.index.IndexableField;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.index.SegmentReader;
import org.apache.lucene.index.TieredMergePolicy;
import org.apache.lucene.misc.index.BPIndexReorderer;
import org.apache.lucene.misc.index.BPReorderingMergePolicy;
import org.apache.lucene.search.similarities.BM25Similarity;
import org.apache.lucene.store.Directory;
import org.apache.lucene.store.MMapDirectory;

/**
 * {@code index}: one reader thread cuts the JSON-lines corpus into chunks of whole lines and
 * hands them through a bounded queue to N indexing threads, which parse the lines (Jackson
 * streaming parser) and call {@link IndexWriter#addDocument} concurrently (one in-memory segment
 * per thread). Then {@code forceMerge(1)}, commit, close. With {@code --bp} the force-merged
 * segment's documents are reordered by recursive graph bisection ({@link BPIndexReorderer}).
 */
final class Indexer {
  private Indexer() {}

  /** Tokenised, stored, indexed with freqs, positions and offsets (the protocol's text field). */
  static final FieldType TEXT_TYPE;

  static {
    FieldType t = new FieldType();
    t.setTokenized(true);
    t.setStored(true);
    t.setIndexOptions(IndexOptions.DOCS_AND_FREQS_AND_POSITIONS_AND_OFFSETS);
    t.freeze();
    TEXT_TYPE = t;
  }

  /** Bytes of whole lines handed to a worker at once (a longer line makes a larger chunk). */
  private static final int CHUNK_BYTES = 4 << 20;

  private static final JsonFactory JSON =
      JsonFactory.builder()
          .streamReadConstraints(
              StreamReadConstraints.builder()
                  .maxStringLength(Integer.MAX_VALUE)
                  .maxNameLength(Integer.MAX_VALUE)
                  .maxNumberLength(Integer.MAX_VALUE)
                  .build())
          .build();

  /** A run of whole lines: {@code data[0..len)}, the first being line {@code firstLine}. */
  private record Chunk(byte[] data, int len, long firstLine) {}

  private static final Chunk END = new Chunk(new byte[0], 0, -1);

  /** A corpus error at a line (1-based). */
  private record Failure(long line, String message) {}

  /** A record that cannot be indexed. */
  static final class BadRecord extends Exception {
    private static final long serialVersionUID = 1L;

    BadRecord(String message) {
      super(message);
    }
  }

  /** Parsed record fields. */
  static final class ParsedDoc {
    String id;
    String title;
    String body;
    final Typed.Values typed = new Typed.Values();
  }

  /** The segment diagnostic {@link BPReorderingMergePolicy} sets to whether it reordered. */
  static final String BP_REORDERED = "bp.reordered";

  /**
   * For tests only: a system property that overrides {@link BPIndexReorderer}'s minimum document
   * frequency of the terms it looks at (default {@value BPIndexReorderer#DEFAULT_MIN_DOC_FREQ}),
   * so that the self-test's corpora of a few hundred documents are really reordered. The bench
   * never sets it.
   */
  static final String BP_MIN_DOC_FREQ_PROPERTY = "tierdex.bp.minDocFreq";

  static int run(String corpusArg, String indexArg, int threads, int memoryMb, boolean bp)
      throws Exception {
    Path corpus = Paths.get(corpusArg);
    Path indexDir = Paths.get(indexArg).toAbsolutePath();
    if (!Files.isRegularFile(corpus)) {
      throw new Main.UsageException("corpus file not found: " + corpusArg);
    }
    if (Files.exists(indexDir)) {
      if (!Files.isDirectory(indexDir)) {
        throw new Main.UsageException("index path exists and is not a directory: " + indexArg);
      }
      try (DirectoryStream<Path> ds = Files.newDirectoryStream(indexDir)) {
        if (ds.iterator().hasNext()) {
          throw new Main.UsageException("index directory is not empty: " + indexArg);
        }
      }
    }
    boolean created = !Files.exists(indexDir);
    Files.createDirectories(indexDir);

    log(
        "lucene index: corpus=%s index=%s threads=%d memory-mb=%d%s (%s)",
        corpus, indexDir, threads, memoryMb, bp ? " bp" : "", Main.versionLine());
    if (bp && System.getProperty(BP_MIN_DOC_FREQ_PROPERTY) != null) {
      log("test setting: BP min doc freq %s", System.getProperty(BP_MIN_DOC_FREQ_PROPERTY));
    }

    Analyzer analyzer = Analysis.analyzer();
    boolean ok = false;
    Directory dir = new MMapDirectory(indexDir);
    IndexWriter writer = null;
    try {
      writer = new IndexWriter(dir, config(analyzer, memoryMb, bp));
      long t0 = System.nanoTime();
      long docs = feed(corpus, writer, threads, t0);
      writer.flush();
      long t1 = System.nanoTime();
      log(
          "added %d documents in %.2f s; force-merging into one segment%s",
          docs, secs(t1 - t0), bp ? " (BP reordering)" : "");
      writer.forceMerge(1, true);
      writer.commit();
      writer.close();
      writer = null;
      if (bp && reordered(dir) == null) {
        // One flushed segment and nothing to merge: forceMerge(1) left it as it was, so no merge
        // reordered it. Rewrite it through addIndexes, which the BP merge policy reorders too.
        log("one flushed segment, not merged: rewriting it with BP reordering");
        rewriteReordered(dir, analyzer, memoryMb);
      }
      long t2 = System.nanoTime();
      int segments;
      int numDocs;
      try (DirectoryReader r = DirectoryReader.open(dir)) {
        segments = r.leaves().size();
        numDocs = r.numDocs();
      }
      Boolean reordered = reordered(dir);
      if (segments != 1 || numDocs != docs) {
        throw new IllegalStateException(
            "index check failed: " + segments + " segments, " + numDocs + " docs");
      }
      if (bp && !Boolean.TRUE.equals(reordered)) {
        // BPReorderingMergePolicy skips reordering (silently) when BPIndexReorderer's RAM budget,
        // a tenth of the heap by default, is too small for the segment.
        throw new IllegalStateException(
            "index check failed: the segment was not reordered (BPIndexReorderer's RAM budget is"
                + " a tenth of the JVM heap: raise TIERDEX_BENCH_HEAP_MB)");
      }
      if (bp) {
        log("BP reordering done: one segment of %d docs, reordered", docs);
      }
      log(
          "done: %d docs, index %.2f s, merge+commit %.2f s, %d MB on disk",
          docs, secs(t1 - t0), secs(t2 - t1), sizeOnDisk(indexDir) >> 20);
      System.out.printf(
          Locale.ROOT,
          "{\"docs\":%d,\"index_secs\":%.3f,\"merge_secs\":%.3f}%n",
          docs,
          secs(t1 - t0),
          secs(t2 - t1));
      System.out.flush();
      ok = true;
      return 0;
    } catch (CorpusException e) {
      System.err.println("error: " + e.getMessage());
      return 1;
    } finally {
      if (writer != null) {
        try {
          writer.rollback();
        } catch (Throwable t) {
          System.err.println("warning: rollback failed: " + t);
        }
      }
      dir.close();
      if (!ok) {
        // Leave no half-built index behind (the directory was new or empty when we started).
        deleteRecursively(indexDir, created);
      }
    }
  }

  /**
   * The writer's configuration: Lucene's default merge policy and scheduler ({@link
   * TieredMergePolicy}, {@code ConcurrentMergeScheduler}), so background merges happen during
   * indexing as for any Lucene user; {@code forceMerge(1)} at the end. No compound files: the
   * single final segment is read through the plain per-format files. With {@code bp} the merge
   * policy is wrapped in a {@link BPReorderingMergePolicy} with a default {@link BPIndexReorderer}
   * that reorders forced merges only (and {@code addIndexes}): the final segment is reordered
   * from all documents, so reordering the background merges before it would be wasted work.
   */
  private static IndexWriterConfig config(Analyzer analyzer, int memoryMb, boolean bp) {
    IndexWriterConfig iwc = new IndexWriterConfig(analyzer);
    iwc.setOpenMode(IndexWriterConfig.OpenMode.CREATE);
    iwc.setSimilarity(new BM25Similarity());
    iwc.setRAMBufferSizeMB(memoryMb);
    iwc.setMaxBufferedDocs(IndexWriterConfig.DISABLE_AUTO_FLUSH);
    iwc.setUseCompoundFile(false);
    TieredMergePolicy mp = new TieredMergePolicy();
    mp.setNoCFSRatio(0.0);
    if (bp) {
      BPIndexReorderer reorderer = new BPIndexReorderer();
      Integer minDocFreq = Integer.getInteger(BP_MIN_DOC_FREQ_PROPERTY);
      if (minDocFreq != null) {
        reorderer.setMinDocFreq(minDocFreq);
      }
      BPReorderingMergePolicy bpmp = new BPReorderingMergePolicy(mp, reorderer);
      bpmp.setMinNaturalMergeNumDocs(Integer.MAX_VALUE);
      iwc.setMergePolicy(bpmp);
    } else {
      iwc.setMergePolicy(mp);
    }
    return iwc;
  }

  /**
   * Whether the index's one segment was reordered ({@link #BP_REORDERED} diagnostic: true when a
   * BP merge reordered it, false when it skipped); null when no BP merge wrote it (a segment
   * straight from a flush, or more than one segment).
   */
  private static Boolean reordered(Directory dir) throws IOException {
    try (DirectoryReader r = DirectoryReader.open(dir)) {
      if (r.leaves().size() != 1) {
        return null;
      }
      String v =
          ((SegmentReader) r.leaves().get(0).reader())
              .getSegmentInfo()
              .info
              .getDiagnostics()
              .get(BP_REORDERED);
      return v == null ? null : Boolean.valueOf(v);
    }
  }

  /**
   * Replaces the index's segment by a reordered copy: a new writer on the same directory ({@code
   * OpenMode.CREATE}: the next commit drops the old segment; open readers keep it) adds it
   * through {@code addIndexes}, which {@link BPReorderingMergePolicy} reorders like a forced
   * merge.
   */
  private static void rewriteReordered(Directory dir, Analyzer analyzer, int memoryMb)
      throws IOException {
    try (DirectoryReader r = DirectoryReader.open(dir);
        IndexWriter w = new IndexWriter(dir, config(analyzer, memoryMb, true))) {
      CodecReader[] segments =
          r.leaves().stream().map(l -> (CodecReader) l.reader()).toArray(CodecReader[]::new);
      w.addIndexes(segments);
      w.commit();
    }
  }

  /** A bad corpus: message names the line. */
  static final class CorpusException extends Exception {
    private static final long serialVersionUID = 1L;

    CorpusException(String message) {
      super(message);
    }
  }

  /** Reads the corpus, feeds the workers; returns the number of documents added. */
  private static long feed(Path corpus, IndexWriter writer, int threads, long t0)
      throws Exception {
    BlockingQueue<Chunk> queue = new ArrayBlockingQueue<>(2 * threads);
    AtomicReference<Failure> failure = new AtomicReference<>();
    LongAdder added = new LongAdder();
    Thread[] workers = new Thread[threads];
    for (int i = 0; i < threads; i++) {
      Worker w = new Worker(writer, queue, failure, added);
      workers[i] = new Thread(w, "indexer-" + i);
      workers[i].start();
    }
    long lines = 0;
    Throwable readError = null;
    try (InputStream in = Files.newInputStream(corpus)) {
      byte[] buf = new byte[CHUNK_BYTES];
      int len = 0;
      boolean first = true;
      boolean eof = false;
      long lastLog = System.nanoTime();
      while (!eof && failure.get() == null) {
        int n = in.read(buf, len, buf.length - len);
        if (n < 0) {
          eof = true;
        } else {
          len += n;
        }
        if (first && len >= 3) {
          first = false;
          if ((buf[0] & 0xFF) == 0xEF && (buf[1] & 0xFF) == 0xBB && (buf[2] & 0xFF) == 0xBF) {
            buf[0] = buf[1] = buf[2] = ' '; // UTF-8 byte order mark: blank it out
          }
        }
        int cut; // chunk = buf[0..cut)
        if (eof) {
          cut = len;
        } else {
          cut = lastIndexOf(buf, len, (byte) '\n') + 1;
          if (cut == 0) {
            if (len == buf.length) {
              buf = Arrays.copyOf(buf, buf.length * 2); // a line longer than the buffer
            }
            continue;
          }
          if (len < buf.length / 2 && n > 0) {
            continue; // keep filling: hand over reasonably large chunks
          }
        }
        if (cut > 0) {
          byte[] next = new byte[Math.max(CHUNK_BYTES, len - cut + 1)];
          System.arraycopy(buf, cut, next, 0, len - cut);
          queue.put(new Chunk(buf, cut, lines + 1));
          lines += count(buf, cut, (byte) '\n');
          buf = next;
          len = len - cut;
        }
        long now = System.nanoTime();
        if (now - lastLog > 10_000_000_000L) {
          lastLog = now;
          long d = added.sum();
          log("  %d docs, %.0f docs/s", d, d / secs(now - t0));
        }
      }
    } catch (IOException e) {
      readError = e;
    } finally {
      for (int i = 0; i < threads; i++) {
        queue.put(END);
      }
      for (Thread w : workers) {
        w.join();
      }
    }
    if (readError != null) {
      throw new CorpusException("cannot read corpus " + corpus + ": " + readError);
    }
    Failure f = failure.get();
    if (f != null) {
      throw new CorpusException(corpus + ":" + f.line() + ": " + f.message());
    }
    long docs = added.sum();
    if (docs == 0) {
      throw new CorpusException("corpus " + corpus + " has no documents");
    }
    return docs;
  }

  /** An indexing thread: parses the lines of the chunks it takes and adds the documents. */
  private static final class Worker implements Runnable {
    private final IndexWriter writer;
    private final BlockingQueue<Chunk> queue;
    private final AtomicReference<Failure> failure;
    private final LongAdder added;
    // Reused Field instances (one document per thread; Lucene copies what it needs).
    private final Field idField = new StringField("id", "", Field.Store.YES);
    private final Field titleField = new Field("title", "", TEXT_TYPE);
    private final Field bodyField = new Field("body", "", TEXT_TYPE);
    private final List<IndexableField> doc = new ArrayList<>();
    private final ParsedDoc rec = new ParsedDoc();

    Worker(
        IndexWriter writer,
        BlockingQueue<Chunk> queue,
        AtomicReference<Failure> failure,
        LongAdder added) {
      this.writer = writer;
      this.queue = queue;
      this.failure = failure;
      this.added = added;
    }

    @Override
    public void run() {
      while (true) {
        Chunk c;
        try {
          c = queue.take();
        } catch (InterruptedException e) {
          fail(0, "interrupted");
          return;
        }
        if (c == END) {
          return;
        }
        if (failure.get() != null) {
          continue; // drain the queue so that the reader never blocks
        }
        process(c);
      }
    }

    private void process(Chunk c) {
      byte[] b = c.data();
      int end = c.len();
      long line = c.firstLine();
      int pos = 0;
      long n = 0;
      while (pos < end) {
        int nl = indexOf(b, pos, end, (byte) '\n');
        int lineEnd = nl < 0 ? end : nl;
        int next = nl < 0 ? end : nl + 1;
        if (!isBlank(b, pos, lineEnd)) {
          try {
            parse(b, pos, lineEnd - pos, rec);
            idField.setStringValue(rec.id);
            titleField.setStringValue(rec.title);
            bodyField.setStringValue(rec.body);
            doc.clear();
            doc.add(idField);
            doc.add(titleField);
            doc.add(bodyField);
            rec.typed.addFields(doc);
            writer.addDocument(doc);
            n++;
          } catch (BadRecord e) {
            fail(line, e.getMessage());
            break;
          } catch (Throwable t) {
            fail(line, "cannot index document: " + t);
            break;
          }
        }
        pos = next;
        line++;
      }
      added.add(n);
    }

    private void fail(long line, String message) {
      // Keep the earliest line when several workers fail.
      Failure f = new Failure(line, message);
      failure.accumulateAndGet(f, (a, b) -> a == null || b.line() < a.line() ? b : a);
    }
  }

  /**
   * Parses one record: an object with {@code id} (string or integer; or {@code url}), {@code
   * title} and {@code body} (string or null, missing = empty), and the typed fields of
   * bench/PROTOCOL.md when present; other fields ignored. Same rules as tierdex's corpus reader.
   */
  static void parse(byte[] b, int off, int len, ParsedDoc out) throws BadRecord {
    String id = null;
    String url = null;
    String title = null;
    String body = null;
    boolean[] seen = new boolean[9];
    String field = null;
    Typed.Values typed = out.typed;
    typed.clear();
    try (JsonParser p = JSON.createParser(b, off, len)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        throw new BadRecord("expected a JSON object");
      }
      JsonToken t;
      while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        JsonToken v = p.nextToken();
        int slot =
            switch (name) {
              case "id" -> 0;
              case "url" -> 1;
              case "title" -> 2;
              case "body" -> 3;
              case Typed.CATEGORY -> 4;
              case Typed.TAGS -> 5;
              case Typed.DATE -> 6;
              case Typed.PRICE -> 7;
              case Typed.POPULARITY -> 8;
              default -> -1;
            };
        if (slot < 0) {
          p.skipChildren();
          continue;
        }
        if (seen[slot]) {
          throw new BadRecord("duplicate field `" + name + "`");
        }
        seen[slot] = true;
        field = name;
        switch (slot) {
          case 0, 1 -> {
            String s;
            if (v == JsonToken.VALUE_STRING || v == JsonToken.VALUE_NUMBER_INT) {
              s = p.getText();
            } else {
              throw new BadRecord("field `" + name + "` must be a string or an integer");
            }
            if (slot == 0) {
              id = s;
            } else {
              url = s;
            }
          }
          case 4, 5 -> keywords(p, v, name, slot == 4 ? typed.categories : typed.tags);
          case 6 -> {
            if (v == JsonToken.VALUE_STRING) {
              try {
                typed.dateMillis = Typed.parseDate(p.getText());
              } catch (IllegalArgumentException e) {
                throw new BadRecord("field `date`: " + e.getMessage());
              }
              typed.hasDate = true;
            } else if (v == JsonToken.VALUE_NUMBER_INT) {
              typed.dateMillis = p.getLongValue();
              typed.hasDate = true;
            } else if (v != JsonToken.VALUE_NULL) {
              throw new BadRecord(
                  "field `date` must be an ISO-8601 string or an integer of epoch milliseconds");
            }
          }
          case 7 -> {
            if (v == JsonToken.VALUE_NUMBER_INT || v == JsonToken.VALUE_NUMBER_FLOAT) {
              typed.price = p.getDoubleValue();
              typed.hasPrice = true;
            } else if (v != JsonToken.VALUE_NULL) {
              throw new BadRecord("field `price` must be a number");
            }
          }
          case 8 -> {
            if (v == JsonToken.VALUE_NUMBER_INT) {
              typed.popularity = p.getLongValue();
              typed.hasPopularity = true;
            } else if (v != JsonToken.VALUE_NULL) {
              throw new BadRecord("field `popularity` must be an integer");
            }
          }
          default -> {
            String s;
            if (v == JsonToken.VALUE_STRING) {
              s = p.getText();
            } else if (v == JsonToken.VALUE_NULL) {
              s = "";
            } else {
              throw new BadRecord("field `" + name + "` must be a string");
            }
            if (slot == 2) {
              title = s;
            } else {
              body = s;
            }
          }
        }
        field = null;
      }
      if (t != JsonToken.END_OBJECT) {
        throw new BadRecord("malformed JSON object");
      }
      if (p.nextToken() != null) {
        throw new BadRecord("trailing characters after the JSON object");
      }
    } catch (JsonProcessingException e) {
      String where = field == null ? "" : "bad value for field `" + field + "`: ";
      throw new BadRecord("invalid JSON: " + where + e.getOriginalMessage()
          + " (column " + e.getLocation().getColumnNr() + ")");
    } catch (IOException e) {
      throw new BadRecord("invalid JSON: " + e.getMessage());
    }
    String key = id != null ? id : url;
    if (key == null) {
      throw new BadRecord("missing `id` (or `url`) field");
    }
    if (key.isEmpty()) {
      throw new BadRecord("empty `id` (or `url`)");
    }
    out.id = key;
    out.title = title == null ? "" : title;
    out.body = body == null ? "" : body;
  }

  /** A keyword field's value: a string, an array of strings, or null. */
  private static void keywords(JsonParser p, JsonToken v, String name, List<String> out)
      throws IOException, BadRecord {
    if (v == JsonToken.VALUE_STRING) {
      out.add(p.getText());
    } else if (v == JsonToken.START_ARRAY) {
      JsonToken t;
      while ((t = p.nextToken()) != JsonToken.END_ARRAY) {
        if (t != JsonToken.VALUE_STRING) {
          throw new BadRecord("field `" + name + "` must hold strings");
        }
        out.add(p.getText());
      }
    } else if (v != JsonToken.VALUE_NULL) {
      throw new BadRecord("field `" + name + "` must be a string or an array of strings");
    }
  }

  private static boolean isBlank(byte[] b, int from, int to) {
    for (int i = from; i < to; i++) {
      byte c = b[i];
      if (c != ' ' && c != '\t' && c != '\r') {
        return false;
      }
    }
    return true;
  }

  private static int indexOf(byte[] b, int from, int to, byte x) {
    for (int i = from; i < to; i++) {
      if (b[i] == x) {
        return i;
      }
    }
    return -1;
  }

  private static int lastIndexOf(byte[] b, int len, byte x) {
    for (int i = len - 1; i >= 0; i--) {
      if (b[i] == x) {
        return i;
      }
    }
    return -1;
  }

  private static long count(byte[] b, int len, byte x) {
    long n = 0;
    for (int i = 0; i < len; i++) {
      if (b[i] == x) {
        n++;
      }
    }
    return n;
  }

  private static double secs(long nanos) {
    return nanos / 1e9;
  }

  private static long sizeOnDisk(Path dir) {
    try (Stream<Path> s = Files.list(dir)) {
      return s.mapToLong(
              p -> {
                try {
                  return Files.size(p);
                } catch (IOException e) {
                  return 0;
                }
              })
          .sum();
    } catch (IOException e) {
      return 0;
    }
  }

  private static void deleteRecursively(Path dir, boolean alsoDir) {
    try (Stream<Path> s = Files.walk(dir)) {
      for (Path p : s.sorted(Comparator.reverseOrder()).toList()) {
        if (alsoDir || !p.equals(dir)) {
          Files.deleteIfExists(p);
        }
      }
    } catch (IOException e) {
      System.err.println("warning: could not remove " + dir + ": " + e);
    }
  }

  static void log(String fmt, Object... args) {
    System.err.println(String.format(Locale.ROOT, fmt, args));
  }
}
