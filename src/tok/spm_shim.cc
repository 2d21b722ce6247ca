// spm_shim.cc — see spm_shim.h: SentencePieceProcessor behind a C interface. The library's only
// C++ (the project's rule: C++ only as a thin shim around an established C++ library).
#include "spm_shim.h"

#include <sentencepiece_processor.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

struct tok_spm {
    sentencepiece::SentencePieceProcessor sp;
    int model_type = 0;
};

namespace {

int fail(char *err, size_t errn, const char *what, const std::string &msg) {
    if (errn) {
        std::string m = std::string(what) + ": " + msg;
        for (char &c : m)
            if (c == '\n' || c == '\r') c = ' ';
        std::snprintf(err, errn, "%s", m.c_str());
    }
    return 1;
}

char *dup_str(const std::string &s, size_t *len) {
    char *p = static_cast<char *>(std::malloc(s.size() + 1));
    if (!p) return nullptr;
    std::memcpy(p, s.data(), s.size());
    p[s.size()] = 0;
    *len = s.size();
    return p;
}

// Walking serialized protobuf bytes p: a varint at j (before end), and skipping one field's
// value after its key — a group (start key, wire type 3) up to its end key (the same field
// number, wire type 4), nested groups included (depth-limited), as protobuf skips unknown fields.
struct pb_walk {
    const unsigned char *p;
    bool varint(size_t &j, size_t end, uint64_t &v) const {
        v = 0;
        for (int sh = 0; j < end && sh < 64; sh += 7) {
            unsigned char c = p[j++];
            v |= (uint64_t)(c & 0x7f) << sh;
            if (!(c & 0x80)) return true;
        }
        return false;
    }
    bool skip(size_t &j, size_t end, uint64_t key, int depth = 0) const {
        uint64_t v;
        switch (key & 7) {
        case 0: return varint(j, end, v);
        case 1: if (end - j < 8) return false; j += 8; return true;
        case 5: if (end - j < 4) return false; j += 4; return true;
        case 2: if (!varint(j, end, v) || v > end - j) return false; j += v; return true;
        case 3:
            if (depth > 64) return false;
            while (j < end) {
                uint64_t k;
                if (!varint(j, end, k)) return false;
                if ((k & 7) == 4) return (k >> 3) == (key >> 3);
                if (!skip(j, end, k, depth + 1)) return false;
            }
            return false;
        default: return false;
        }
    }
};

// The TrainerSpec's model_type (field 3 of message TrainerSpec, field 2 of ModelProto), read
// from the serialized bytes: the processor does not expose it. 1 when absent (unigram).
int read_model_type(const std::string &b) {
    const unsigned char *p = reinterpret_cast<const unsigned char *>(b.data());
    size_t n = b.size(), i = 0;
    const pb_walk w{p};
    while (i < n) {
        uint64_t key, len;
        if (!w.varint(i, n, key)) return 1;
        if (key == ((2 << 3) | 2)) {
            if (!w.varint(i, n, len) || len > n - i) return 1;
            size_t j = i, end = i + len;
            while (j < end) {
                uint64_t k2, v;
                if (!w.varint(j, end, k2)) return 1;
                if (k2 == ((3 << 3) | 0)) return w.varint(j, end, v) ? (int)v : 1;
                if (!w.skip(j, end, k2)) return 1;
            }
            i = end;
        } else if (!w.skip(i, n, key)) {
            return 1;
        }
    }
    return 1;
}

// SentencePiece's normalizer trusts its precompiled charsmap: a corrupt double-array trie makes
// its lookups read outside the blob. So every charsmap (normalizer_spec and denormalizer_spec,
// field 2 of each) is checked first, the way those lookups will walk it: from every node
// reachable from the root, all 256 children indices must lie inside the units, and every leaf's
// value must point into the strings, which must end with a NUL byte. An empty charsmap (identity
// normalization) is fine. Returns an empty string when valid, else what is wrong.
std::string check_charsmap(const unsigned char *b, size_t n) {
    if (n == 0) return "";
    if (n < 4) return "shorter than its 4-byte header";
    uint32_t T = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    if (T == 0 || T % 4 || T >= n - 4 + 1 || (size_t)T > n - 4) return "trie size outside the blob";
    size_t nu = T / 4, nl = n - 4 - T;
    const unsigned char *u8 = b + 4, *norm = b + 4 + T;
    if (nl == 0 || norm[nl - 1] != 0) return "normalized strings not NUL-terminated";
    auto unit = [&](size_t i) {
        const unsigned char *q = u8 + 4 * i;
        return (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
    };
    auto offset = [](uint32_t u) { return (size_t)(u >> 10) << ((u & 0x200u) >> 6); };
    std::vector<unsigned char> seen(nu, 0);
    std::vector<size_t> stack;
    size_t root = 0 ^ offset(unit(0));
    if ((root | 0xff) >= nu) return "trie root outside the units";
    stack.push_back(root);
    seen[root] = 1;
    while (!stack.empty()) {
        size_t p = stack.back();
        stack.pop_back();
        for (unsigned c = 0; c < 256; c++) {
            size_t child = p ^ c;
            uint32_t u = unit(child);
            if ((u & 0x800000ffu) != c) continue;
            size_t next = child ^ offset(u);
            if ((next | 0xff) >= nu) return "trie node outside the units";
            if ((u >> 8) & 1) {
                if ((unit(next) & 0x7fffffffu) >= nl) return "trie value outside the strings";
            }
            if (!seen[next]) {
                seen[next] = 1;
                stack.push_back(next);
            }
        }
    }
    return "";
}

// Every precompiled_charsmap of the serialized ModelProto b, checked; "" when all are valid.
// *walked: whether the walk reached the end. It does not when the bytes are not a protobuf
// (SentencePiece's parser then refuses them too) — but protobuf also accepts what this walk
// cannot vouch for, so a model that SentencePiece loads and this walk did not cover is refused
// (tok_spm_load): that is how a charsmap hidden behind a field this walk stopped at reached the
// normalizer (fuzz/regress/spm/crash-fef338ea..., an unknown group field, wire type 3, before
// normalizer_spec). Groups (wire types 3 and 4) are skipped as protobuf skips them.
std::string check_model(const std::string &bytes, bool *walked) {
    *walked = false;
    const unsigned char *p = reinterpret_cast<const unsigned char *>(bytes.data());
    size_t n = bytes.size(), i = 0;
    const pb_walk w{p};
    while (i < n) {
        uint64_t key, len;
        if (!w.varint(i, n, key)) return "";
        if (key == ((3 << 3) | 2) || key == ((5 << 3) | 2)) {
            if (!w.varint(i, n, len) || len > n - i) return "";
            size_t j = i, end = i + len;
            while (j < end) {
                uint64_t k2, l2;
                if (!w.varint(j, end, k2)) return "";
                if (k2 == ((2 << 3) | 2)) {
                    if (!w.varint(j, end, l2) || l2 > end - j) return "";
                    std::string e = check_charsmap(p + j, (size_t)l2);
                    if (!e.empty())
                        return std::string(key >> 3 == 3 ? "normalizer_spec" : "denormalizer_spec") +
                               ".precompiled_charsmap is corrupt: " + e;
                    j += l2;
                } else if (!w.skip(j, end, k2)) {
                    return "";
                }
            }
            i = end;
        } else if (!w.skip(i, n, key)) {
            return "";
        }
    }
    *walked = true;
    return "";
}

}  // namespace

extern "C" int tok_spm_load(const void *data, size_t n, tok_spm **out, char *err, size_t errn) {
    *out = nullptr;
    try {
        /* owned until handed out: an exception from the library (or read_model_type) below
         * must not leak the half-loaded model */
        std::unique_ptr<tok_spm> s(new tok_spm);
        std::string bytes(static_cast<const char *>(data), n);
        bool walked;
        std::string bad = check_model(bytes, &walked);
        if (!bad.empty()) {
            return fail(err, errn, "not a usable SentencePiece model", bad);
        }
        auto st = s->sp.LoadFromSerializedProto(bytes);
        if (st.ok() && !walked) {
            return fail(err, errn, "not a usable SentencePiece model",
                        "its protobuf holds fields whose normalizer data cannot be checked");
        }
        if (!st.ok()) {
            std::string m = st.ToString();
            if (m.find("ParseFromArray") != std::string::npos)
                m = "the protobuf does not parse (a truncated file, or another kind of file)";
            while (!m.empty() && m.back() == ' ') m.pop_back();
            return fail(err, errn, "not a SentencePiece model", m);
        }
        if (s->sp.GetPieceSize() <= 0) {
            return fail(err, errn, "not a SentencePiece model", "no pieces");
        }
        s->model_type = read_model_type(bytes) - 1;
        *out = s.release();
        return 0;
    } catch (const std::bad_alloc &) {
        return fail(err, errn, "SentencePiece model", "out of memory");
    } catch (const std::exception &e) {
        return fail(err, errn, "SentencePiece model", e.what());
    }
}

extern "C" void tok_spm_free(tok_spm *s) { delete s; }

extern "C" int32_t tok_spm_size(const tok_spm *s) { return s->sp.GetPieceSize(); }

extern "C" int tok_spm_model_type(const tok_spm *s) { return s->model_type; }

extern "C" const char *tok_spm_piece(const tok_spm *s, int32_t id, size_t *len) {
    const std::string &p = s->sp.IdToPiece(id);
    *len = p.size();
    return p.data();
}

extern "C" int tok_spm_kind(const tok_spm *s, int32_t id) {
    if (s->sp.IsUnknown(id)) return TOK_SPM_UNKNOWN;
    if (s->sp.IsControl(id)) return TOK_SPM_CONTROL;
    if (s->sp.IsUnused(id)) return TOK_SPM_UNUSED;
    if (s->sp.IsByte(id)) return TOK_SPM_BYTE;
    return TOK_SPM_NORMAL;
}

extern "C" int tok_spm_encode(const tok_spm *s, const char *text, size_t n, int32_t **ids,
                              char **pieces, size_t **off, size_t *k, char *err, size_t errn) {
    *ids = nullptr, *k = 0;
    if (pieces) *pieces = nullptr, *off = nullptr;
    try {
        std::vector<std::string> ps;
        std::vector<int> v;
        auto st = s->sp.Encode(absl::string_view(text, n), &v);
        if (!st.ok()) return fail(err, errn, "SentencePiece encode", st.ToString());
        if (pieces) {
            st = s->sp.Encode(absl::string_view(text, n), &ps);
            if (!st.ok()) return fail(err, errn, "SentencePiece encode", st.ToString());
            if (ps.size() != v.size()) return fail(err, errn, "SentencePiece encode", "pieces and ids differ");
        }
        int32_t *a = static_cast<int32_t *>(std::malloc((v.size() + 1) * sizeof *a));
        if (!a) return fail(err, errn, "SentencePiece encode", "out of memory");
        for (size_t i = 0; i < v.size(); i++) a[i] = v[i];
        if (pieces) {
            size_t total = 0;
            for (auto &p : ps) total += p.size();
            char *b = static_cast<char *>(std::malloc(total + 1));
            size_t *o = static_cast<size_t *>(std::malloc((ps.size() + 1) * sizeof *o));
            if (!b || !o) {
                std::free(a), std::free(b), std::free(o);
                return fail(err, errn, "SentencePiece encode", "out of memory");
            }
            size_t at = 0;
            for (size_t i = 0; i < ps.size(); i++) {
                o[i] = at;
                std::memcpy(b + at, ps[i].data(), ps[i].size());
                at += ps[i].size();
            }
            o[ps.size()] = at;
            *pieces = b, *off = o;
        }
        *ids = a, *k = v.size();
        return 0;
    } catch (const std::bad_alloc &) {
        return fail(err, errn, "SentencePiece encode", "out of memory");
    } catch (const std::exception &e) {
        return fail(err, errn, "SentencePiece encode", e.what());
    }
}

extern "C" int tok_spm_decode_pieces(const tok_spm *s, const char *const *pieces,
                                     const size_t *lens, size_t n, char **text, size_t *len,
                                     char *err, size_t errn) {
    *text = nullptr, *len = 0;
    try {
        std::vector<absl::string_view> v;
        v.reserve(n);
        for (size_t i = 0; i < n; i++) v.emplace_back(pieces[i], lens[i]);
        std::string out;
        auto st = s->sp.Decode(v, &out);
        if (!st.ok()) return fail(err, errn, "SentencePiece decode", st.ToString());
        if (!(*text = dup_str(out, len))) return fail(err, errn, "SentencePiece decode", "out of memory");
        return 0;
    } catch (const std::bad_alloc &) {
        return fail(err, errn, "SentencePiece decode", "out of memory");
    } catch (const std::exception &e) {
        return fail(err, errn, "SentencePiece decode", e.what());
    }
}

extern "C" int tok_spm_decode_ids(const tok_spm *s, const int32_t *ids, size_t n, char **text,
                                  size_t *len, char *err, size_t errn) {
    *text = nullptr, *len = 0;
    try {
        std::vector<int> v(ids, ids + n);
        std::string out;
        auto st = s->sp.Decode(v, &out);
        if (!st.ok()) return fail(err, errn, "SentencePiece decode", st.ToString());
        if (!(*text = dup_str(out, len))) return fail(err, errn, "SentencePiece decode", "out of memory");
        return 0;
    } catch (const std::bad_alloc &) {
        return fail(err, errn, "SentencePiece decode", "out of memory");
    } catch (const std::exception &e) {
        return fail(err, errn, "SentencePiece decode", e.what());
    }
}
