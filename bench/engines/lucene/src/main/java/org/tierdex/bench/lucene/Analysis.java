package org.tierdex.bench.lucene;

import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.analysis.CharArraySet;
import org.apache.lucene.analysis.standard.StandardAnalyzer;

/** The one analyzer used for indexing and queries. */
final class Analysis {
  private Analysis() {}

  /**
   * StandardTokenizer (Unicode UAX#29 word boundaries, tokens of at most 255 chars) followed by
   * LowerCaseFilter; no stop words, no stemming.
   */
  static Analyzer analyzer() {
    return new StandardAnalyzer(CharArraySet.EMPTY_SET);
  }
}
