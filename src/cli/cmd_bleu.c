/* cmd_bleu.c — `attn bleu HYPOTHESES REFERENCES...`: corpus BLEU of a file of translations
 * against one or more files of references, identical to sacreBLEU's (src/eval/bleu.c), printed
 * as sacreBLEU's text line or as JSON. */
#include "cmd_bleu.h"

#include "cli.h"

#include "attn_eval.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char bleu_usage[] =
    "usage: attn bleu HYPOTHESES REFERENCES... [--tokenize zh|13a|none] [--lowercase] [--json]\n"
    "\n"
    "Corpus BLEU, identical to sacreBLEU 2.x with its defaults (4-grams, brevity penalty\n"
    "against the closest reference length, 'exp' smoothing). Each file holds one sentence per\n"
    "line, UTF-8; all files must have the same number of lines. Several REFERENCES files are\n"
    "several references per sentence. HYPOTHESES may be '-' for standard input.\n"
    "\n"
    "options:\n"
    "  --tokenize NAME  zh (the default: attn translates English to Chinese; each Chinese\n"
    "                   character is a token), 13a (sacreBLEU's default, for other target\n"
    "                   languages) or none (text already tokenized). Also -tok NAME.\n"
    "  --lowercase      case-insensitive BLEU (also -lc)\n"
    "  --json           print {\"score\", \"precisions\", \"bp\", \"ratio\", \"hyp_len\", \"ref_len\",\n"
    "                   \"tokenize\", \"lowercase\", \"counts\", \"totals\", \"nrefs\", \"signature\"}\n"
    "\n"
    "output: BLEU = 23.45 56.1/30.2/17.8/10.9 (BP = 0.950 ratio = 0.951 hyp_len = 1234 "
    "ref_len = 1297)\n"
    "        (score, 1- to 4-gram precisions in %, brevity penalty, hyp_len / ref_len, tokens)\n";

/* sacreBLEU's signature without its version field: what was computed, not by what. */
static void signature(char *buf, size_t n, size_t nrefs, const attn_bleu_options *o) {
    snprintf(buf, n, "nrefs:%zu|case:%s|eff:no|tok:%s|smooth:exp", nrefs,
             o->lowercase ? "lc" : "mixed", attn_bleu_tokenizer_name(o->tokenize));
}

static int print_json(const attn_bleu_result *r, size_t nrefs, const attn_bleu_options *o) {
    char sig[128];
    signature(sig, sizeof sig, nrefs, o);
    json_t *prec = json_array(), *counts = json_array(), *totals = json_array();
    for (int k = 0; k < ATTN_BLEU_ORDER; k++) {
        json_array_append_new(prec, json_real(r->precisions[k]));
        json_array_append_new(counts, json_integer(r->counts[k]));
        json_array_append_new(totals, json_integer(r->totals[k]));
    }
    json_t *j = json_pack("{s:s, s:f, s:o, s:f, s:f, s:I, s:I, s:s, s:b, s:o, s:o, s:I, s:s}",
                          "name", "BLEU", "score", r->score, "precisions", prec, "bp", r->bp,
                          "ratio", r->ratio, "hyp_len", (json_int_t)r->sys_len, "ref_len",
                          (json_int_t)r->ref_len, "tokenize",
                          attn_bleu_tokenizer_name(o->tokenize), "lowercase", (int)o->lowercase,
                          "counts", counts, "totals", totals, "nrefs", (json_int_t)nrefs,
                          "signature", sig);
    char *s = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (!s) return cli_fail(attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "bleu: cannot build JSON"));
    puts(s);
    free(s);
    return CLI_EXIT_OK;
}

int cmd_bleu(int argc, char **argv) {
    attn_bleu_options opt = {ATTN_BLEU_TOKENIZE_ZH, false};
    bool json = false;
    const char **files = calloc((size_t)argc + 1, sizeof *files);
    if (!files) return cli_fail(attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "bleu: out of memory"));
    size_t nfiles = 0;
    bool only_files = false; /* after "--" */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_files || a[0] != '-' || !strcmp(a, "-")) {
            files[nfiles++] = a;
        } else if (!strcmp(a, "--")) {
            only_files = true;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(bleu_usage, stdout);
            free(files);
            return CLI_EXIT_OK;
        } else if (!strcmp(a, "--tokenize") || !strcmp(a, "-tok")) {
            if (i + 1 >= argc || attn_bleu_tokenizer_parse(argv[i + 1], &opt.tokenize)) {
                free(files);
                return cli_usage_error("bleu: %s needs zh, 13a or none%s%s%s", a,
                                       i + 1 < argc ? " (got '" : "",
                                       i + 1 < argc ? argv[i + 1] : "", i + 1 < argc ? "')" : "");
            }
            i++;
        } else if (!strcmp(a, "--lowercase") || !strcmp(a, "-lc")) {
            opt.lowercase = true;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else {
            free(files);
            return cli_usage_error("bleu: unknown option '%s'", a);
        }
    }
    if (nfiles < 2) {
        free(files);
        return cli_usage_error("bleu needs a hypotheses file and at least one references file "
                               "(usage: attn bleu HYPOTHESES REFERENCES... [--tokenize zh|13a|none]"
                               " [--lowercase] [--json])");
    }
    for (size_t k = 1; k < nfiles; k++)
        if (!strcmp(files[k], "-")) {
            free(files);
            return cli_usage_error("bleu: only HYPOTHESES may be '-' (standard input)");
        }

    int rc = CLI_EXIT_OK;
    attn_status st = ATTN_STATUS_OK;
    attn_bleu_lines *text = calloc(nfiles, sizeof *text);
    const char *const **refs = calloc(nfiles, sizeof *refs);
    if (!text || !refs) {
        st = attn_set_error(ATTN_STATUS_OUT_OF_MEMORY, "bleu: out of memory");
        goto done;
    }
    for (size_t k = 0; k < nfiles && !st; k++) st = attn_bleu_read_lines(files[k], &text[k]);
    if (st) goto done;
    if (text[0].n == 0) {
        /* scoring nothing is a mistake upstream (a translation that produced no output) */
        st = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                            "%s: no lines to score (empty input): expected one hypothesis per "
                            "line",
                            strcmp(files[0], "-") ? files[0] : "<stdin>");
        goto done;
    }
    for (size_t k = 1; k < nfiles; k++)
        if (text[k].n != text[0].n) {
            st = attn_set_error(ATTN_STATUS_INVALID_ARGUMENT,
                                "bleu: line counts differ: %s has %zu line%s, %s has %zu line%s "
                                "(one sentence per line, every file aligned)",
                                files[0], text[0].n, text[0].n == 1 ? "" : "s", files[k],
                                text[k].n, text[k].n == 1 ? "" : "s");
            goto done;
        }
    for (size_t k = 1; k < nfiles; k++) refs[k - 1] = (const char *const *)text[k].lines;
    attn_bleu_result r;
    st = attn_bleu_corpus(text[0].n, (const char *const *)text[0].lines, nfiles - 1, refs, &opt,
                          &r);
    if (st) goto done;
    if (json) {
        rc = print_json(&r, nfiles - 1, &opt);
    } else {
        /* sacreBLEU's BLEUScore.format(): score to 2 decimals, precisions to 1, BP/ratio to 3 */
        printf("BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld "
               "ref_len = %lld)\n",
               r.score, r.precisions[0], r.precisions[1], r.precisions[2], r.precisions[3], r.bp,
               r.ratio, (long long)r.sys_len, (long long)r.ref_len);
    }
done:
    if (text)
        for (size_t k = 0; k < nfiles; k++) attn_bleu_lines_free(&text[k]);
    free(text);
    free(refs);
    free(files);
    if (st) return cli_fail(st);
    if (rc == CLI_EXIT_OK && fflush(stdout) != 0)
        return cli_fail(attn_set_error(ATTN_STATUS_IO, "bleu: cannot write the result"));
    return rc;
}
