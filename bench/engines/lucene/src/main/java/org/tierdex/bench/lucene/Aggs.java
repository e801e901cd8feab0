package org.tierdex.bench.lucene;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.lucene.document.LongPoint;
import org.apache.lucene.facet.FacetResult;
import org.apache.lucene.facet.FacetsCollector;
import org.apache.lucene.facet.LabelAndValue;
import org.apache.lucene.facet.StringDocValuesReaderState;
import org.apache.lucene.facet.StringValueFacetCounts;
import org.apache.lucene.facet.range.LongRange;
import org.apache.lucene.facet.range.LongRangeFacetCounts;
import org.apache.lucene.index.DocValues;
import org.apache.lucene.index.IndexReader;
import org.apache.lucene.index.PointValues;
import org.apache.lucene.index.SortedNumericDocValues;
import org.apache.lucene.search.DocIdSetIterator;
import org.apache.lucene.util.BytesRef;
import org.apache.lucene.util.NumericUtils;

/**
 * The benchmark's aggregations ({@code "aggs"} of a structured query), computed with lucene-facet
 * over a {@link FacetsCollector} of all matches and answered in Elasticsearch's shape (as tierdex
 * answers them):
 *
 * <ul>
 *   <li>{@code {"terms": {"field": KEYWORD, "size": n}}}: {@link StringValueFacetCounts} over the
 *       keyword's SortedSetDocValues; buckets by count descending, then key ascending (UTF-8);
 *   <li>{@code {"date_histogram": {"field": "date", "calendar_interval": "month"}}}: {@link
 *       LongRangeFacetCounts} with one {@link LongRange} per calendar month (UTC) of the index's
 *       dates; buckets from the first to the last non-empty month;
 *   <li>{@code {"stats": {"field": NUMBER}}}: the matching documents' numeric doc values, read
 *       through the collector's matching docs.
 * </ul>
 *
 * Any other shape or option is an error.
 */
final class Aggs {
  private static final long DAY_MS = 86_400_000L;

  private sealed interface Spec permits Terms, Month, Stats {}

  private record Terms(String name, String field, int size) implements Spec {}

  private record Month(String name, String field) implements Spec {}

  private record Stats(String name, String field, boolean isDouble) implements Spec {}

  private final List<Spec> specs;

  private Aggs(List<Spec> specs) {
    this.specs = specs;
  }

  /** Reader-wide state shared by the workers: facet reader states and month ranges. */
  static final class Context {
    private final IndexReader reader;
    private final Map<String, StringDocValuesReaderState> states = new ConcurrentHashMap<>();
    private final Map<String, LongRange[]> months = new ConcurrentHashMap<>();

    Context(IndexReader reader) {
      this.reader = reader;
    }

    private StringDocValuesReaderState state(String field) {
      return states.computeIfAbsent(
          field,
          f -> {
            try {
              return new StringDocValuesReaderState(reader, f);
            } catch (IOException e) {
              throw new UncheckedIOException(e);
            }
          });
    }

    /** One range per calendar month from the smallest to the largest value of {@code field}. */
    private LongRange[] months(String field) {
      return months.computeIfAbsent(
          field,
          f -> {
            try {
              byte[] lo = PointValues.getMinPackedValue(reader, f);
              byte[] hi = PointValues.getMaxPackedValue(reader, f);
              if (lo == null || hi == null) {
                return new LongRange[0];
              }
              long max = LongPoint.decodeDimension(hi, 0);
              List<LongRange> out = new ArrayList<>();
              LocalDate m =
                  Instant.ofEpochMilli(LongPoint.decodeDimension(lo, 0))
                      .atZone(ZoneOffset.UTC)
                      .toLocalDate()
                      .withDayOfMonth(1);
              long start = m.toEpochDay() * DAY_MS;
              while (start <= max) {
                LocalDate next = m.plusMonths(1);
                long end = next.toEpochDay() * DAY_MS;
                out.add(new LongRange(Long.toString(start), start, true, end, false));
                m = next;
                start = end;
              }
              return out.toArray(new LongRange[0]);
            } catch (IOException e) {
              throw new UncheckedIOException(e);
            }
          });
    }
  }

  /** Parses an {@code aggs} object (a parsed JSON tree, as {@link JsonQuery} reads them). */
  @SuppressWarnings("unchecked")
  static Aggs parse(Object tree) throws JsonQuery.BadQuery {
    if (!(tree instanceof Map<?, ?> aggs)) {
      throw new JsonQuery.BadQuery("`aggs` must be an object");
    }
    List<Spec> specs = new ArrayList<>();
    for (Map.Entry<String, Object> e : ((Map<String, Object>) aggs).entrySet()) {
      String name = e.getKey();
      if (!(e.getValue() instanceof Map<?, ?> body) || body.size() != 1) {
        throw new JsonQuery.BadQuery(
            "aggregation `" + name + "` must be an object with exactly one type (no sub-aggregations)");
      }
      Map.Entry<String, Object> only =
          ((Map<String, Object>) body).entrySet().iterator().next();
      String type = only.getKey();
      String what = "`" + type + "` aggregation `" + name + "`";
      if (!(only.getValue() instanceof Map<?, ?> p0)) {
        throw new JsonQuery.BadQuery(what + " takes an object");
      }
      Map<String, Object> p = (Map<String, Object>) p0;
      if (!(p.get("field") instanceof String field)) {
        throw new JsonQuery.BadQuery(what + " needs a string `field`");
      }
      Typed.Kind kind = Typed.kind(field);
      switch (type) {
        case "terms" -> {
          onlyKeys(p, what, "field", "size");
          if (kind != Typed.Kind.KEYWORD) {
            throw new JsonQuery.BadQuery(what + ": `" + field + "` is not a keyword field");
          }
          Object size = p.getOrDefault("size", 10L);
          if (!(size instanceof Long s) || s < 0 || s > Integer.MAX_VALUE) {
            throw new JsonQuery.BadQuery(what + ": `size` must be a whole number");
          }
          specs.add(new Terms(name, field, (int) (long) s));
        }
        case "date_histogram" -> {
          onlyKeys(p, what, "field", "calendar_interval");
          if (kind != Typed.Kind.DATE) {
            throw new JsonQuery.BadQuery(what + ": `" + field + "` is not a date field");
          }
          Object interval = p.get("calendar_interval");
          if (!"month".equals(interval) && !"1M".equals(interval)) {
            throw new JsonQuery.BadQuery(
                what + ": only `calendar_interval: month` is supported, not " + interval);
          }
          specs.add(new Month(name, field));
        }
        case "stats" -> {
          onlyKeys(p, what, "field");
          if (kind != Typed.Kind.DOUBLE && kind != Typed.Kind.LONG) {
            throw new JsonQuery.BadQuery(what + ": `" + field + "` is not a numeric field");
          }
          specs.add(new Stats(name, field, kind == Typed.Kind.DOUBLE));
        }
        default ->
            throw new JsonQuery.BadQuery(
                "aggregation `"
                    + name
                    + "`: `"
                    + type
                    + "` is not supported (terms, date_histogram by month, stats)");
      }
    }
    return new Aggs(specs);
  }

  private static void onlyKeys(Map<String, Object> p, String what, String... allowed)
      throws JsonQuery.BadQuery {
    List<String> ok = Arrays.asList(allowed);
    for (String k : p.keySet()) {
      if (!ok.contains(k)) {
        throw new JsonQuery.BadQuery(
            what + ": `" + k + "` is not supported (only " + String.join(", ", allowed) + ")");
      }
    }
  }

  /** Appends the results, an object of named results, to {@code b}. */
  void answer(StringBuilder b, Context ctx, FacetsCollector fc) throws IOException {
    b.append('{');
    boolean first = true;
    for (Spec spec : specs) {
      if (!first) {
        b.append(',');
      }
      first = false;
      switch (spec) {
        case Terms t -> {
          Json.string(b, t.name());
          b.append(':');
          terms(b, ctx, fc, t);
        }
        case Month m -> {
          Json.string(b, m.name());
          b.append(':');
          month(b, ctx, fc, m);
        }
        case Stats s -> {
          Json.string(b, s.name());
          b.append(':');
          stats(b, fc, s);
        }
      }
    }
    b.append('}');
  }

  private static void terms(StringBuilder b, Context ctx, FacetsCollector fc, Terms t)
      throws IOException {
    StringValueFacetCounts counts = new StringValueFacetCounts(ctx.state(t.field()), fc);
    FacetResult r = counts.getAllChildren(t.field());
    LabelAndValue[] all = r == null ? new LabelAndValue[0] : r.labelValues.clone();
    Arrays.sort(
        all,
        (x, y) -> {
          int c = Long.compare(y.value.longValue(), x.value.longValue());
          return c != 0 ? c : new BytesRef(x.label).compareTo(new BytesRef(y.label));
        });
    int shown = Math.min(t.size(), all.length);
    long other = 0;
    for (int i = shown; i < all.length; i++) {
      other += all[i].value.longValue();
    }
    b.append("{\"doc_count_error_upper_bound\":0,\"sum_other_doc_count\":")
        .append(other)
        .append(",\"buckets\":[");
    for (int i = 0; i < shown; i++) {
      if (i > 0) {
        b.append(',');
      }
      b.append("{\"key\":");
      Json.string(b, all[i].label);
      b.append(",\"doc_count\":").append(all[i].value.longValue()).append('}');
    }
    b.append("]}");
  }

  private static void month(StringBuilder b, Context ctx, FacetsCollector fc, Month m)
      throws IOException {
    LongRange[] ranges = ctx.months(m.field());
    long[] counts = new long[ranges.length];
    if (ranges.length > 0) {
      FacetResult r = new LongRangeFacetCounts(m.field(), fc, ranges).getAllChildren(m.field());
      Map<String, Long> byLabel = new HashMap<>();
      if (r != null) {
        for (LabelAndValue lv : r.labelValues) {
          byLabel.put(lv.label, lv.value.longValue());
        }
      }
      for (int i = 0; i < ranges.length; i++) {
        counts[i] = byLabel.getOrDefault(ranges[i].label, 0L);
      }
    }
    int lo = 0;
    while (lo < counts.length && counts[lo] == 0) {
      lo++;
    }
    int hi = counts.length - 1;
    while (hi >= lo && counts[hi] == 0) {
      hi--;
    }
    b.append("{\"buckets\":[");
    for (int i = lo; i <= hi; i++) {
      if (i > lo) {
        b.append(',');
      }
      long key = ranges[i].min;
      b.append("{\"key_as_string\":\"")
          .append(LocalDate.ofEpochDay(Math.floorDiv(key, DAY_MS)))
          .append("T00:00:00.000Z\",\"key\":")
          .append(key)
          .append(",\"doc_count\":")
          .append(counts[i])
          .append('}');
    }
    b.append("]}");
  }

  private static void stats(StringBuilder b, FacetsCollector fc, Stats s) throws IOException {
    long count = 0;
    double sum = 0;
    double min = Double.POSITIVE_INFINITY;
    double max = Double.NEGATIVE_INFINITY;
    for (FacetsCollector.MatchingDocs md : fc.getMatchingDocs()) {
      DocIdSetIterator it = md.bits() == null ? null : md.bits().iterator();
      if (it == null) {
        continue;
      }
      SortedNumericDocValues dv = DocValues.getSortedNumeric(md.context().reader(), s.field());
      for (int doc = it.nextDoc(); doc != DocIdSetIterator.NO_MORE_DOCS; doc = it.nextDoc()) {
        if (!dv.advanceExact(doc)) {
          continue;
        }
        for (int i = 0, n = dv.docValueCount(); i < n; i++) {
          long raw = dv.nextValue();
          double v = s.isDouble() ? NumericUtils.sortableLongToDouble(raw) : raw;
          count++;
          sum += v;
          min = Math.min(min, v);
          max = Math.max(max, v);
        }
      }
    }
    b.append("{\"count\":").append(count);
    if (count == 0) {
      b.append(",\"min\":null,\"max\":null,\"avg\":null,\"sum\":0.0}");
      return;
    }
    b.append(",\"min\":")
        .append(min)
        .append(",\"max\":")
        .append(max)
        .append(",\"avg\":")
        .append(sum / count)
        .append(",\"sum\":")
        .append(sum)
        .append('}');
  }
}
