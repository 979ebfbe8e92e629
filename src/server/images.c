/* images.c - see images.h. */
#include "server/images.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/conv.h"
#include "chat/rows.h"
#include "model/plan.h"
#include "server/engine.h"
#include "util/clock.h"
#include "util/error.h"
#include "vision/rows.h"

void k3_server_vision_init(k3_server_vision *v, const char *model_dir, double room,
                           int no_mem_check, const k3_tokenizer *tok)
{
    k3_err e = { 0, "" };
    memset(v, 0, sizeof *v);
    v->model_dir = model_dir;
    v->room = room;
    v->no_mem_check = no_mem_check;
    if (!model_dir)
        snprintf(v->why, sizeof v->why, "this server takes no images");
    else if (k3_engine_is_leader()) /* the op stream carries ids only (engine.h) */
        snprintf(v->why, sizeof v->why, "k3-mpi serve takes no images");
    else if (k3_vision_config(model_dir, &v->cfg, &e) != K3_OK ||
             k3_vision_probe(model_dir, &e) != K3_OK)
        snprintf(v->why, sizeof v->why, "this model cannot read images: %.200s", e.msg);
    else if (k3_tok_special_id(tok, "<|media_pad|>") < 0)
        snprintf(v->why, sizeof v->why, "this model cannot read images: its tokenizer has no "
                                        "<|media_pad|>");
    else if (v->cfg.media_id >= 0 &&
             k3_tok_special_id(tok, "<|media_pad|>") != v->cfg.media_id)
        snprintf(v->why, sizeof v->why, "this model cannot read images: the tokenizer's "
                                        "<|media_pad|> is not the config's "
                                        "media_placeholder_token_id");
    else
        v->ok = 1;
}

/* The encoding's cost judged: the server's image budget, then the machine. */
static int judge(const k3_server_vision *v, const k3_vcost *c, k3_api_error *err)
{
    const double gib = 1073741824.0;
    uint64_t avail = 0, cg = 0, free_now;
    if (v->room >= 0 && (double)c->total > v->room)
        return k3_api_fail(err, 400, "image_too_large", "messages",
                           "Encoding this request's %zu images (%zu rows) needs %.3f GB "
                           "(the vision tower %.3f, its work %.3f, the rows %.3f), more than "
                           "the %.3f GB this server's memory budget leaves beside the model.",
                           c->images, c->rows, c->total / gib, c->tower / gib, c->work / gib,
                           c->row_bytes / gib, (v->room > 0 ? v->room : 0) / gib);
    if (v->no_mem_check || !(free_now = k3_mem_available(&avail, &cg)) || c->total <= free_now)
        return 0;
    return k3_api_fail(err, 503, "server_busy", NULL,
                       "Encoding this request's images needs %.3f GB; the machine has %.3f GB "
                       "free now. Try again later.", c->total / gib, free_now / gib);
}

int k3_server_images_prompt(const k3_server_vision *v, const k3_tokenizer *tok,
                            const k3_chat *c, k3_answer_job *job, k3_api_error *err)
{
    k3_vplan plans[K3_CHAT_MAX_IMAGES];
    int64_t nrows[K3_CHAT_MAX_IMAGES];
    k3_vcost cost;
    k3_err e = { 0, "" };
    if (!c || !c->nimages)
        return 0;
    if (!v->ok)
        return k3_api_fail(err, 400, "unsupported_value", "messages",
                           "An image_url content part: %s.", v->why);
    if (k3_chat_image_plans(c, v->cfg.p, plans, nrows, &e))
        return k3_api_fail(err, 400, "invalid_value", "messages", "%s", e.msg);
    if (k3_chat_expand_pads(tok, c, nrows, &job->ids, &job->n, job->span, job->image,
                            &job->nspan, &e))
        return k3_api_fail(err, e.code == K3_EINPUT ? 400 : 500, NULL, "messages", "%s", e.msg);
    k3_vision_cost(&v->cfg, plans, c->nimages, &cost);
    return judge(v, &cost, err);
}

int k3_server_images_encode(const k3_server_vision *v, const k3_chat *c, k3_answer_job *job,
                            k3_err *e)
{
    size_t off[K3_CHAT_MAX_IMAGES];
    k3_vplan plans[K3_CHAT_MAX_IMAGES];
    int64_t nrows[K3_CHAT_MAX_IMAGES];
    uint64_t hash[K3_CHAT_MAX_IMAGES];
    k3_chat_sources cs;
    double t0 = k3_seconds();
    if (!job->nspan)
        return K3_OK;
    k3_chat_sources_of(c, "image", &cs);
    k3_vsrc src = { NULL, cs.data, cs.len, cs.what, cs.n };
    if (k3_vision_rows(v->model_dir, &v->cfg, &src, NULL, NULL, plans, &job->rows, e))
        return e->code;
    for (size_t i = 0; i < cs.n; i++)
        nrows[i] = plans[i].rows;
    k3_chat_index_rows(job->rows, nrows, cs.n, (size_t)v->cfg.T, off, hash);
    k3_chat_point_rows(job->span, job->image, job->nspan, job->rows, off, hash,
                       (size_t)v->cfg.T, job->n, &job->embeds, e);
    job->encode_seconds = k3_seconds() - t0;
    return e->code;
}

void k3_server_images_free(k3_answer_job *job)
{
    free(job->rows);
    free((void *)job->embeds);
    job->rows = NULL;
    job->embeds = NULL;
}
