/* images.h - image_url content parts in k3 serve (docs/VISION.md §10.7).
 *
 * A chat request's image parts are read by the chat reader (chat/images.h:
 * data URLs only, each image decoded once there, so a bad one is a 400
 * naming it before anything is queued). Then, on the connection thread
 * (k3_server_images_prompt, from k3_answer_prompt): the server must be able
 * to place images at all (a vision tower, a tokenizer with <|media_pad|>,
 * not k3-mpi), each image's plan gives its row count, the pads are expanded
 * (chat/rows.h) before the context is checked, and the encoding's cost
 * (vision/rows.h) is judged: over the server's image budget (what the run's
 * --budget-gb / --preset leaves beside the text plan) a 400, over what the
 * machine has free now a 503. On the worker thread, when the job is taken
 * (k3_server_images_encode): the tower is opened, run once on all of the
 * request's images and closed, and the job gets its rows, the positions'
 * row pointers and the spans' hashes, which prompt reuse compares
 * (k3_state_common). */
#ifndef K3_SERVER_IMAGES_H
#define K3_SERVER_IMAGES_H

#include "k3/chat.h"
#include "k3/tokenizer.h"
#include "server/answer.h"
#include "server/api.h"
#include "vision/vmodel.h"

/* What the server knows about its images: fixed while serving. */
typedef struct k3_server_vision {
    const char *model_dir; /* the checkpoint whose vision tower encodes */
    int ok;                /* images can be served */
    char why[256];         /* when not ok: why, for the 400 */
    k3_vcfg cfg;
    double room;           /* bytes an image request's encoding may take (< 0: no budget) */
    int no_mem_check;      /* not checked against the machine's free memory */
} k3_server_vision;

/* model_dir NULL: no images. room, no_mem_check: as above. */
void k3_server_vision_init(k3_server_vision *v, const char *model_dir, double room,
                           int no_mem_check, const k3_tokenizer *tok);

/* job->ids[0..n) rendered from chat c: when c has images, refused (400 or
 * 503, err) unless v can serve them, else expanded, with job's spans and
 * images set. Returns 0 or the status. */
int k3_server_images_prompt(const k3_server_vision *v, const k3_tokenizer *tok,
                            const k3_chat *c, k3_answer_job *job, k3_api_error *err);

/* The worker: encodes job's images (c's), filling job->rows, embeds and
 * the spans' hashes. K3_OK at once without images. */
int k3_server_images_encode(const k3_server_vision *v, const k3_chat *c, k3_answer_job *job,
                            k3_err *e);

/* Frees job's rows and row pointers. */
void k3_server_images_free(k3_answer_job *job);

#endif
