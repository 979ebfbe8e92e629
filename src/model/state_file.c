/* state_file.c - k3_state_save / k3_state_load (see k3/k3.h).
 *
 * Layout, version 2 (version 1: no image count, no spans). Header integers
 * are little-endian; arrays are in the machine's byte order (little-endian
 * on every supported target):
 *
 *   "k3-state"                    8 bytes
 *   u32 version, u32 layers       layers = bound layers (--layers may bind fewer)
 *   u64 config hash               XXH64 of every configuration field (see below)
 *   u64 weights fingerprint       XXH64 of the embedding's first 4 KiB and final_norm
 *   u64 vocab, conv floats, recurrent floats, KV row floats
 *   u8  layer kind [layers]       0 KDA, 1 MLA
 *   i64 pos
 *   u64 nimg                      image spans, 0 .. pos (version 2)
 *   u32 ids [pos]
 *   per span: i64 start, i64 n, u64 hash   ascending, disjoint, within [0, pos)
 *                                 (version 2; k3_image_span: which images the
 *                                 state holds, so reuse can compare them)
 *   f32 last logits [vocab]
 *   per layer: KDA conv [conv floats] + recurrent [recurrent floats];
 *              MLA cache rows [pos][KV row floats]
 *   u64 XXH64 of every byte before it
 *
 * The header fixes the file's exact size, so truncation is found before
 * anything is read into the state; the checksum finds corruption. The
 * weights fingerprint tells apart checkpoints of one architecture (a
 * fine-tune, another random seed) at the cost of one 4 KiB read. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/model.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/file.h"
#include "util/xxh64.h"

#define MAGIC "k3-state"
#define VERSION 2u
#define FINGERPRINT_BYTES 4096u

/* What must match between a file and the model loading it. */
typedef struct identity {
    uint32_t layers;
    uint64_t config_hash, weights_hash;
    uint64_t vocab, conv, rec, kvw;
    const uint8_t *kinds; /* [layers] */
} identity;

static void hash_i64(k3_xxh64_state *h, int64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)v >> (8 * i));
    k3_xxh64_update(h, b, 8);
}

static void hash_f64(k3_xxh64_state *h, double v)
{
    int64_t bits;
    memcpy(&bits, &v, sizeof bits);
    hash_i64(h, bits);
}

/* Every field of k3_config, in declaration order (a field added there
 * belongs here too). */
static uint64_t config_hash(const k3_config *c)
{
    k3_xxh64_state h;
    k3_xxh64_init(&h, 0);
    const int64_t ints[] = {
        c->vocab_size, c->hidden_size, c->intermediate_size, c->num_hidden_layers,
        c->num_attention_heads, c->q_lora_rank, c->kv_lora_rank, c->qk_nope_head_dim,
        c->qk_rope_head_dim, c->v_head_dim, c->kda_head_dim, c->kda_num_heads,
        c->short_conv_kernel_size, c->first_k_dense_replace, c->num_experts,
        c->num_experts_per_token, c->num_shared_experts, c->moe_intermediate_size,
        c->routed_expert_hidden_size, c->latent_moe_use_norm, c->moe_renormalize,
        c->attn_res_block_size, c->tie_word_embeddings, c->bos_token_id, c->pad_token_id, c->n_eos,
    };
    const double reals[] = { c->gate_lower_bound, c->routed_scaling_factor, c->situ_beta,
                             c->situ_linear_beta, c->rms_norm_eps };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        hash_i64(&h, ints[i]);
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++)
        hash_f64(&h, reals[i]);
    for (int i = 0; i < c->n_eos; i++)
        hash_i64(&h, c->eos_ids[i]);
    k3_xxh64_update(&h, c->layer_kind, (size_t)c->num_hidden_layers);
    return k3_xxh64_digest(&h);
}

static int model_identity(const k3_model *m, identity *id, k3_err *e)
{
    const k3_config *c = &m->cfg;
    id->layers = (uint32_t)m->w.n_layers;
    id->config_hash = config_hash(c);
    id->vocab = (uint64_t)c->vocab_size;
    id->conv = k3_state_conv_floats(c);
    id->rec = k3_state_s_floats(c);
    id->kvw = k3_state_kv_width(c);
    id->kinds = c->layer_kind;
    const k3_tensor_info *t = m->w.embed_info;
    uint64_t n = t->nbytes < FINGERPRINT_BYTES ? t->nbytes : FINGERPRINT_BYTES;
    unsigned char buf[FINGERPRINT_BYTES];
    if (k3_st_read(m->ix, t, 0, n, buf, e) != K3_OK)
        return e->code;
    k3_xxh64_state h;
    k3_xxh64_init(&h, 0);
    k3_xxh64_update(&h, buf, (size_t)n);
    k3_xxh64_update(&h, m->w.final_norm, (size_t)c->hidden_size * sizeof(float));
    id->weights_hash = k3_xxh64_digest(&h);
    return K3_OK;
}

/* Bytes after the header's pos field, checksum included. */
static uint64_t body_bytes(const identity *id, uint64_t pos, uint64_t nimg)
{
    uint64_t n = pos * 4 + nimg * 24 + id->vocab * 4 + 8;
    for (uint32_t i = 0; i < id->layers; i++)
        n += (id->kinds[i] == K3_LAYER_KDA ? id->conv + id->rec : pos * id->kvw) * 4;
    return n;
}

static uint64_t header_bytes(uint32_t layers, uint64_t version)
{
    return 8 + 4 + 4 + 8 * 6 + layers + 8 + (version >= 2 ? 8 : 0);
}

/* ---- writing ---- */

typedef struct writer {
    FILE *f;
    k3_xxh64_state h;
} writer;

static void put(writer *w, const void *p, size_t n)
{
    k3_xxh64_update(&w->h, p, n);
    fwrite(p, 1, n, w->f);
}

static void put_u(writer *w, uint64_t v, int bytes)
{
    unsigned char b[8];
    for (int i = 0; i < bytes; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    put(w, b, (size_t)bytes);
}

static void write_state(writer *w, const k3_state *s, const identity *id)
{
    put(w, MAGIC, 8);
    put_u(w, VERSION, 4);
    put_u(w, id->layers, 4);
    put_u(w, id->config_hash, 8);
    put_u(w, id->weights_hash, 8);
    put_u(w, id->vocab, 8);
    put_u(w, id->conv, 8);
    put_u(w, id->rec, 8);
    put_u(w, id->kvw, 8);
    put(w, id->kinds, id->layers);
    const k3_image_span *img;
    size_t nimg = k3_state_images(s, &img);
    put_u(w, (uint64_t)s->pos, 8);
    put_u(w, nimg, 8);
    put(w, s->ids, (size_t)s->pos * sizeof *s->ids);
    for (size_t i = 0; i < nimg; i++) {
        int64_t n = img[i].start + img[i].n > s->pos ? s->pos - img[i].start : img[i].n;
        put_u(w, (uint64_t)img[i].start, 8);
        put_u(w, (uint64_t)n, 8);
        put_u(w, img[i].hash, 8);
    }
    put(w, s->last, (size_t)id->vocab * sizeof *s->last);
    for (uint32_t i = 0; i < id->layers; i++) {
        if (id->kinds[i] == K3_LAYER_KDA) {
            put(w, s->conv[i], (size_t)id->conv * sizeof(float));
            put(w, s->S[i], (size_t)id->rec * sizeof(float));
        } else {
            put(w, s->kv[i], (size_t)s->pos * (size_t)id->kvw * sizeof(float));
        }
    }
    put_u(w, k3_xxh64_digest(&w->h), 8);
}

int k3_state_save(const k3_state *s, const char *path, k3_err *e)
{
    identity id;
    k3_atomic_file af;
    if (model_identity(s->m, &id, e) != K3_OK || k3_atomic_begin(&af, path, e) != K3_OK)
        return e->code;
    writer w;
    w.f = af.f;
    k3_xxh64_init(&w.h, 0);
    write_state(&w, s, &id);
    return k3_atomic_commit(&af, e);
}

/* ---- reading ---- */

typedef struct reader {
    FILE *f;
    const char *path;
    k3_xxh64_state h;
} reader;

static int get(reader *r, void *p, size_t n, k3_err *e)
{
    if (fread(p, 1, n, r->f) != n)
        return k3_fail(e, ferror(r->f) ? K3_ERUNTIME : K3_EINPUT, "%s: %s", r->path,
                       ferror(r->f) ? "read error" : "truncated state file");
    k3_xxh64_update(&r->h, p, n);
    return K3_OK;
}

static int get_u(reader *r, int bytes, uint64_t *v, k3_err *e)
{
    unsigned char b[8];
    if (get(r, b, (size_t)bytes, e) != K3_OK)
        return e->code;
    *v = 0;
    for (int i = 0; i < bytes; i++)
        *v |= (uint64_t)b[i] << (8 * i);
    return K3_OK;
}

/* Reads and checks the header up to and including the layer map. */
static int read_identity(reader *r, const identity *want, uint64_t *ver, k3_err *e)
{
    char magic[8];
    uint64_t version = 0, layers = 0, v[6] = { 0 };
    if (get(r, magic, 8, e) != K3_OK)
        return e->code;
    if (memcmp(magic, MAGIC, 8) != 0)
        return k3_fail(e, K3_EINPUT, "%s: not a k3 state file", r->path);
    if (get_u(r, 4, &version, e) || get_u(r, 4, &layers, e))
        return e->code;
    if (version > VERSION)
        return k3_fail(e, K3_EINPUT, "%s: state format version %llu is newer than this k3 reads "
                                     "(%u): upgrade k3", r->path, (unsigned long long)version,
                       VERSION);
    *ver = version;
    if (version != VERSION && version != 1)
        return k3_fail(e, K3_EINPUT, "%s: unknown state format version %llu", r->path,
                       (unsigned long long)version);
    for (int i = 0; i < 6; i++)
        if (get_u(r, 8, &v[i], e))
            return e->code;
    if (layers != want->layers)
        return k3_fail(e, K3_EINPUT, "%s: saved by a model running %llu layers, this one runs %u "
                                     "(another model, or another --layers)", r->path,
                       (unsigned long long)layers, want->layers);
    int same_kinds = 1;
    for (uint64_t i = 0; i < layers; i++) {
        uint8_t kind;
        if (get(r, &kind, 1, e))
            return e->code;
        same_kinds &= kind == want->kinds[i];
    }
    if (v[0] != want->config_hash || !same_kinds || v[2] != want->vocab || v[3] != want->conv ||
        v[4] != want->rec || v[5] != want->kvw)
        return k3_fail(e, K3_EINPUT, "%s: saved by another model (its configuration, layer map "
                                     "or dimensions differ)", r->path);
    if (v[1] != want->weights_hash)
        return k3_fail(e, K3_EINPUT, "%s: saved by another checkpoint of this architecture "
                                     "(the weights differ)", r->path);
    return K3_OK;
}

/* The image spans into img[0..nimg): ascending, disjoint, each within
 * [0, pos). */
static int read_spans(reader *r, k3_image_span *img, uint64_t pos, uint64_t nimg, k3_err *e)
{
    uint64_t end = 0;
    for (uint64_t i = 0; i < nimg && !e->code; i++) {
        uint64_t st = 0, n = 0, h = 0;
        if (get_u(r, 8, &st, e) || get_u(r, 8, &n, e) || get_u(r, 8, &h, e))
            break;
        if (st < end || n == 0 || st >= pos || n > pos - st)
            k3_fail(e, K3_EINPUT, "%s: corrupted image span %llu (positions %llu + %llu of "
                                  "%llu)", r->path, (unsigned long long)i,
                    (unsigned long long)st, (unsigned long long)n, (unsigned long long)pos);
        img[i].start = (int64_t)st;
        img[i].n = (int64_t)n;
        img[i].hash = h;
        end = st + n;
    }
    return e->code;
}

/* The spans into the state. */
static int read_state_spans(reader *r, k3_state *s, uint64_t pos, uint64_t nimg, k3_err *e)
{
    k3_image_span *img = nimg ? k3_malloc(e, (size_t)nimg * sizeof *img, "image spans") : NULL;
    if (nimg && !img)
        return e->code;
    if (read_spans(r, img, pos, nimg, e) == K3_OK)
        k3_state_set_images(s, img, (size_t)nimg, e);
    free(img);
    return e->code;
}

static int read_body(reader *r, k3_state *s, const identity *id, uint64_t pos, uint64_t nimg,
                     k3_err *e)
{
    if (k3_state_reserve(s, (int64_t)pos, e) != K3_OK ||
        get(r, s->ids, (size_t)pos * sizeof *s->ids, e) ||
        read_state_spans(r, s, pos, nimg, e) ||
        get(r, s->last, (size_t)id->vocab * sizeof *s->last, e))
        return e->code;
    for (uint32_t i = 0; i < id->layers && !e->code; i++) {
        if (id->kinds[i] == K3_LAYER_KDA) {
            if (!get(r, s->conv[i], (size_t)id->conv * sizeof(float), e))
                get(r, s->S[i], (size_t)id->rec * sizeof(float), e);
        } else {
            get(r, s->kv[i], (size_t)pos * (size_t)id->kvw * sizeof(float), e);
        }
    }
    for (uint64_t i = 0; i < pos && !e->code; i++)
        if (s->ids[i] >= id->vocab)
            k3_fail(e, K3_EINPUT, "%s: token id %u at position %llu is outside the vocabulary",
                    r->path, s->ids[i], (unsigned long long)i);
    return e->code;
}

/* Reads and checks the header through nimg, and the file's size. */
static int read_header(reader *r, const identity *id, uint64_t *pos, uint64_t *nimg, k3_err *e)
{
    uint64_t version = 0;
    struct stat st;
    if (read_identity(r, id, &version, e) != K3_OK || get_u(r, 8, pos, e) != K3_OK ||
        (version >= 2 && get_u(r, 8, nimg, e) != K3_OK))
        return e->code;
    if (*pos > INT32_MAX || *nimg > *pos)
        return k3_fail(e, K3_EINPUT, "%s: corrupted header (position %llu, %llu images)",
                       r->path, (unsigned long long)*pos, (unsigned long long)*nimg);
    uint64_t want = header_bytes(id->layers, version) + body_bytes(id, *pos, *nimg);
    if (fstat(fileno(r->f), &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size != want)
        return k3_fail(e, K3_EINPUT, "%s: %s (%llu bytes; a state of %llu positions takes %llu)",
                       r->path, (uint64_t)st.st_size < want ? "truncated" : "trailing bytes",
                       (unsigned long long)st.st_size, (unsigned long long)*pos,
                       (unsigned long long)want);
    return K3_OK;
}

static int read_state(reader *r, k3_state *s, k3_err *e)
{
    identity id;
    uint64_t pos = 0, sum = 0, nimg = 0;
    if (model_identity(s->m, &id, e) != K3_OK || read_header(r, &id, &pos, &nimg, e) != K3_OK)
        return e->code;
    if (read_body(r, s, &id, pos, nimg, e) != K3_OK)
        return e->code;
    uint64_t digest = k3_xxh64_digest(&r->h);
    if (get_u(r, 8, &sum, e) != K3_OK)
        return e->code;
    if (sum != digest)
        return k3_fail(e, K3_EINPUT, "%s: checksum mismatch: the state file is corrupted", r->path);
    s->pos = (int64_t)pos;
    return K3_OK;
}

/* Opens path for reading from its start (K3_EINPUT naming it when it
 * cannot be opened). */
static int reader_open(reader *r, const char *path, k3_err *e)
{
    r->f = k3_fopen_input(path, e);
    r->path = path;
    k3_xxh64_init(&r->h, 0);
    return r->f ? K3_OK : e->code;
}

int k3_state_load(k3_state *s, const char *path, k3_err *e)
{
    reader r;
    k3_state_reset(s);
    if (reader_open(&r, path, e))
        return e->code;
    read_state(&r, s, e);
    fclose(r.f);
    if (e->code)
        k3_state_reset(s); /* the KDA states may hold part of the file */
    return e->code;
}

int k3_state_file_key(const k3_model *m, const char *path, uint32_t **ids, size_t *n,
                      k3_image_span **img, size_t *nimg, k3_err *e)
{
    identity id;
    uint64_t pos = 0, ni = 0;
    *ids = NULL;
    *img = NULL;
    *n = *nimg = 0;
    reader r;
    if (reader_open(&r, path, e))
        return e->code;
    if (model_identity(m, &id, e) == K3_OK && read_header(&r, &id, &pos, &ni, e) == K3_OK &&
        (*ids = k3_malloc(e, (size_t)(pos ? pos : 1) * sizeof **ids, "a state file's ids")) &&
        (!ni || (*img = k3_malloc(e, (size_t)ni * sizeof **img, "image spans"))) &&
        get(&r, *ids, (size_t)pos * sizeof **ids, e) == K3_OK &&
        read_spans(&r, *img, pos, ni, e) == K3_OK) {
        *n = (size_t)pos;
        *nimg = (size_t)ni;
    }
    fclose(r.f);
    if (e->code) {
        free(*ids);
        free(*img);
        *ids = NULL;
        *img = NULL;
    }
    return e->code;
}
