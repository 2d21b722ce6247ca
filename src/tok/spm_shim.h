/* spm_shim.h — the library's one C++ file (spm_shim.cc): a thin C interface over SentencePiece's
 * own C++ library (Debian's libsentencepiece-dev, linked with -lsentencepiece), for the
 * SentencePiece model files (.spm / .model: a serialized sentencepiece.ModelProto) that Marian
 * (opus-mt) directories ship. Not installed. Every function catches C++ exceptions (out of
 * memory) and reports failures as a non-zero return with a one-line message in err[0..errn). */
#ifndef ATTN_TOK_SPM_SHIM_H
#define ATTN_TOK_SPM_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tok_spm tok_spm;

/* The kinds of pieces (sentencepiece.ModelProto.SentencePiece.Type). */
enum { TOK_SPM_NORMAL = 1, TOK_SPM_UNKNOWN = 2, TOK_SPM_CONTROL = 3, TOK_SPM_USER = 4,
       TOK_SPM_UNUSED = 5, TOK_SPM_BYTE = 6 };

/* A model from the bytes of a model file (copied). */
int tok_spm_load(const void *data, size_t n, tok_spm **out, char *err, size_t errn);
void tok_spm_free(tok_spm *s);
/* Pieces are ids [0, size). */
int32_t tok_spm_size(const tok_spm *s);
/* The piece of id (in range), as bytes valid as long as s. */
const char *tok_spm_piece(const tok_spm *s, int32_t id, size_t *len);
/* One of TOK_SPM_* for id (in range). */
int tok_spm_kind(const tok_spm *s, int32_t id);
/* 0 unigram, 1 BPE, 2 word, 3 char (TrainerSpec.ModelType - 1). */
int tok_spm_model_type(const tok_spm *s);

/* Encode text[0..n) with the model's normalizer: *k pieces, their ids in *ids and, when pieces
 * is not NULL, their strings back to back in *pieces (piece i is (*pieces)[off[i]..off[i+1]),
 * *off has k + 1 entries). The arrays are malloc'd (free them with free). */
int tok_spm_encode(const tok_spm *s, const char *text, size_t n, int32_t **ids, char **pieces,
                   size_t **off, size_t *k, char *err, size_t errn);
/* Decode pieces (SentencePieceProcessor::DecodePieces) into a malloc'd NUL-terminated string. */
int tok_spm_decode_pieces(const tok_spm *s, const char *const *pieces, const size_t *lens,
                          size_t n, char **text, size_t *len, char *err, size_t errn);
/* Decode ids (all in range) the same way (SentencePieceProcessor::DecodeIds). */
int tok_spm_decode_ids(const tok_spm *s, const int32_t *ids, size_t n, char **text, size_t *len,
                       char *err, size_t errn);

#ifdef __cplusplus
}
#endif
#endif
