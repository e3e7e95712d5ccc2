// tests/unit/train/test_state_file.cu: the training state's header (train/state.h), on the host: 2000
// random AdamW states of the default schedule pack to the bytes of the layout every earlier
// version wrote (the slots written out here by number, independently of the library's
// StateSlots) and read back to themselves; Muon's settings take slots 32-37 of a version 2 file
// (an untied head's learning rate slot 38) and leave the others as they are; a schedule of its
// own takes slots 39-45 of a version 3 file, under either optimizer, and leaves the others as
// they are; rows aligned to documents take slots 46-47 of a version 4 file, under any optimizer
// and schedule, and leave the others as they are; Muon's variants take slots 48-52 of a version 5
// file, under any schedule and alignment, and leave the others as they are; the FP8 settings take
// slots 53-55 of a version 6 file, under any optimizer, schedule, alignment and variants; nanochat's
// init (either optimizer) and Muon's groups' own betas take slots 56-61 of a version 7 file, and a
// state read back without the betas' switch gives the groups the vectors' betas; headers whose
// optimizer, schedule, alignment, variants, version and settings disagree are refused with one
// line naming what; the int fields bounded as integers, up to 2^31 - 1; every slot past the
// fields zero.
#include <float.h>
#include <limits.h>
#include <string.h>
#include "common/rng.h"
#include "train/state.h"
#include "tests/lib/test.h"

// The header of s as the files of earlier versions lay it out, slot by slot.
static void pack_by_slot_numbers(const TrainingState* s, int32_t h[HEADER_INTS]) {
    memset(h, 0, HEADER_INTS * sizeof(int32_t));
    const int32_t ints[] = {STATE_MAGIC, STATE_VERSION_ADAMW, s->step, s->config.maxT, s->config.V, s->config.L,
                            s->config.NH, s->config.C, s->config.Vp, s->B, s->T, s->grad_accum,
                            s->schedule.warmup_steps, s->steps, s->adam_t};
    memcpy(h, ints, sizeof(ints));
    const float floats[] = {s->lr, s->schedule.min_lr_frac, s->weight_decay, s->grad_clip};
    memcpy(h + 15, floats, sizeof(floats));
    const uint64_t wide[] = {s->seed, (uint64_t)s->train_loader.epoch, (uint64_t)s->train_loader.step_in_epoch,
                             s->sample_rng};
    for (int i = 0; i < 4; i++) {
        h[19 + 2 * i] = (int32_t)(uint32_t)wide[i];
        h[20 + 2 * i] = (int32_t)(uint32_t)(wide[i] >> 32);
    }
    const int32_t flags[] = {s->attention, s->deterministic, s->recompute, s->classifier_rows, s->world_size};
    memcpy(h + 27, flags, sizeof(flags));
}

static float random_float(Rng* rng, float lo, float hi) { return lo + (hi - lo) * (float)rng_uniform(rng); }

// A valid AdamW state: each field within its bounds and the ones across fields.
static TrainingState random_state(Rng* rng) {
    TrainingState s;
    memset(&s, 0, sizeof(s));
    s.config.L = 1 + (int)(rng_next(rng) % 48);
    s.config.NH = 1 + (int)(rng_next(rng) % 16);
    s.config.C = s.config.NH * 8 * (1 + (int)(rng_next(rng) % 16));
    s.config.V = 1 + (int)(rng_next(rng) % 100000);
    s.config.Vp = padded_vocab(s.config.V);
    s.config.maxT = 1 + (int)(rng_next(rng) % 65536);
    s.B = 1 + (int)(rng_next(rng) % 64);
    s.T = 1 + (int)(rng_next(rng) % (uint64_t)s.config.maxT);
    s.world_size = 1 + (int)(rng_next(rng) % 8);
    s.grad_accum = 1 + (int)(rng_next(rng) % 8);
    s.steps = 1 + (int)(rng_next(rng) % 100000);
    s.step = (int)(rng_next(rng) % (uint64_t)(s.steps + 1));
    s.schedule.warmup_steps = (int)(rng_next(rng) % 1000);
    s.adam_t = s.step;
    s.lr = random_float(rng, 1e-6f, 1e-2f);
    s.schedule.min_lr_frac = random_float(rng, 0.0f, 1.0f);
    s.weight_decay = random_float(rng, 0.0f, 0.5f);
    s.grad_clip = random_float(rng, 0.0f, 2.0f);
    s.seed = rng_next(rng);
    s.train_loader.epoch = (int64_t)(rng_next(rng) % 1000);
    s.train_loader.step_in_epoch = (int64_t)(rng_next(rng) % 1000000);
    s.sample_rng = rng_next(rng);
    s.attention = (int)(rng_next(rng) % 2);
    s.deterministic = (int)(rng_next(rng) % 2);
    s.recompute = (int)(rng_next(rng) % 4);
    s.classifier_rows = 1 + (int)(rng_next(rng) % 100000);
    return s;
}

static void make_muon(TrainingState* s, Rng* rng) {
    s->optimizer = OPTIMIZER_MUON;
    s->muon_momentum = random_float(rng, 0.0f, 0.99f);
    s->embedding_lr = random_float(rng, 1e-4f, 1e-2f);
    s->vector_lr = random_float(rng, 1e-4f, 1e-2f);
    s->adam_b1 = random_float(rng, 0.0f, 0.99f);
    s->adam_b2 = random_float(rng, 0.0f, 0.99f);
}

static void test_adamw_layout(void) {
    test_begin("state header: 2000 random AdamW states in the slots of earlier versions, read back whole");
    Rng rng = {20241130};
    int bad = 0;
    for (int i = 0; i < 2000 && bad < 5; i++) {
        TrainingState s = random_state(&rng), back;
        // Random bits in every field for the layout; a valid state for the way back.
        TrainingState bits = s;
        unsigned char* p = (unsigned char*)&bits;
        for (size_t j = 0; j < sizeof(bits); j++) p[j] = (unsigned char)rng_next(&rng);
        bits.optimizer = OPTIMIZER_ADAMW;
        bits.muon_momentum = bits.embedding_lr = bits.vector_lr = bits.adam_b1 = bits.adam_b2 = bits.head_lr = 0.0f;
        bits.schedule = (StepSchedule){.warmup_steps = bits.schedule.warmup_steps,
                                       .min_lr_frac = bits.schedule.min_lr_frac};
        bits.align_documents = bits.document_token = 0;
        bits.muon_qkv = bits.muon_ns = bits.cautious_weight_decay = bits.normuon = 0;
        bits.normuon_beta2 = 0.0f;
        bits.fp8 = bits.fp8_scaling = bits.fp8_grad_bf16 = 0;
        bits.init_scheme = bits.group_betas = 0;
        bits.embedding_b1 = bits.embedding_b2 = bits.head_b1 = bits.head_b2 = 0.0f;
        StateFileHeader packed, again;
        int32_t expected[HEADER_INTS];
        char err[ERR_LEN] = "";
        for (int k = 0; k < 2; k++) {
            const TrainingState* t = k ? &s : &bits;
            state_header_pack(t, &packed);
            pack_by_slot_numbers(t, expected);
            if (memcmp(packed.ints, expected, sizeof(expected)) != 0) {
                int slot = 0;
                while (packed.ints[slot] == expected[slot]) slot++;
                test_fail("state %d: slot %d holds %d, the old layout %d", i, slot, packed.ints[slot], expected[slot]);
                bad++;
            }
        }
        if (state_header_unpack(&packed, &back, err) != 0) {
            test_fail("state %d: refused: %s", i, err);
            bad++;
            continue;
        }
        state_header_pack(&back, &again);
        if (memcmp(&packed, &again, sizeof(packed)) != 0) {
            test_fail("state %d: read back, it packs to other bytes", i);
            bad++;
        }
    }
    test_end();
}

static void test_muon_slots(void) {
    test_begin("state header: Muon's settings in slots 32-37 of version 2, an untied head's lr in 38, the rest as AdamW's");
    Rng rng = {46};
    for (int i = 0; i < 200; i++) {
        TrainingState s = random_state(&rng), back;
        StateFileHeader adamw, muon, again;
        state_header_pack(&s, &adamw);
        make_muon(&s, &rng);
        // Every other state of an untied head: its lr in slot 38, which the files of a tied
        // head and of earlier versions hold 0 in.
        if (i % 2) s.head_lr = random_float(&rng, 1e-4f, 1e-2f);
        state_header_pack(&s, &muon);
        char err[ERR_LEN] = "";
        CHECK(muon.ints[1] == STATE_VERSION_MUON && adamw.ints[1] == STATE_VERSION_ADAMW, "versions %d and %d",
              muon.ints[1], adamw.ints[1]);
        CHECK(memcmp(muon.ints + 2, adamw.ints + 2, 30 * sizeof(int32_t)) == 0, "state %d: slots 2-31 differ", i);
        const float settings[5] = {s.muon_momentum, s.embedding_lr, s.vector_lr, s.adam_b1, s.adam_b2};
        CHECK(muon.ints[32] == OPTIMIZER_MUON && memcmp(muon.ints + 33, settings, sizeof(settings)) == 0,
              "state %d: slots 32-37 do not hold the optimizer and its settings", i);
        CHECK(memcmp(muon.ints + 38, &s.head_lr, sizeof(float)) == 0, "state %d: slot 38 does not hold the head's lr", i);
        for (int k = 39; k < HEADER_INTS; k++) CHECK(muon.ints[k] == 0 && adamw.ints[k] == 0, "slot %d is not zero", k);
        for (int k = 32; k < 39; k++) CHECK(adamw.ints[k] == 0, "an AdamW state's slot %d is not zero", k);
        CHECK(state_header_unpack(&muon, &back, err) == 0, "state %d refused: %s", i, err);
        state_header_pack(&back, &again);
        CHECK(memcmp(&muon, &again, sizeof(muon)) == 0, "state %d: read back, it packs to other bytes", i);
        if (test_case_failures) break;
    }
    test_end();
}

// A valid schedule of its own with warmup's warmup and end, the rest at random: wsd or cosine, a
// momentum warm-up or cool-down under Muon, a linear decay; never the default.
static StepSchedule random_schedule(Rng* rng, int muon, const StepSchedule* warmup) {
    StepSchedule s = {.warmup_steps = warmup->warmup_steps, .min_lr_frac = warmup->min_lr_frac};
    int parts = 1 + (int)(rng_next(rng) % (muon ? 15 : 3));   // bits: wsd, linear decay, momentum warm-up, cool-down
    if (parts & 1) {
        s.lr_shape = LR_SHAPE_WSD;
        s.warmdown_frac = random_float(rng, 0.01f, 1.0f);
    }
    if (parts & 2) s.decay_shape = DECAY_SHAPE_LINEAR;
    if (parts & 4) {
        s.momentum_warmup_steps = 1 + (int)(rng_next(rng) % 1000);
        s.momentum_start = random_float(rng, 0.0f, 0.99f);
    }
    if (parts & 8) {
        s.momentum_cooldown_steps = 1 + (int)(rng_next(rng) % 1000);
        s.momentum_end = random_float(rng, 0.0f, 0.99f);
    }
    return s;
}

static void test_schedule_slots(void) {
    test_begin("state header: a schedule of its own in slots 39-45 of version 3, under either optimizer, the rest as "
               "the default's");
    Rng rng = {54};
    for (int i = 0; i < 400; i++) {
        TrainingState s = random_state(&rng), back;
        if (i % 2) make_muon(&s, &rng);
        StateFileHeader plain, scheduled, again;
        state_header_pack(&s, &plain);
        s.schedule = random_schedule(&rng, i % 2, &s.schedule);
        state_header_pack(&s, &scheduled);
        char err[ERR_LEN] = "";
        CHECK(plain.ints[1] == (i % 2 ? STATE_VERSION_MUON : STATE_VERSION_ADAMW) &&
              scheduled.ints[1] == STATE_VERSION_SCHEDULE, "state %d: versions %d and %d", i, plain.ints[1],
              scheduled.ints[1]);
        CHECK(memcmp(plain.ints + 2, scheduled.ints + 2, 37 * sizeof(int32_t)) == 0, "state %d: slots 2-38 differ", i);
        const StepSchedule* c = &s.schedule;
        const int32_t slots[7] = {c->lr_shape, 0, c->momentum_warmup_steps, 0, c->momentum_cooldown_steps, 0,
                                  c->decay_shape};
        const float floats[3] = {c->warmdown_frac, c->momentum_start, c->momentum_end};
        for (int k = 0; k < 7; k++)
            CHECK(k % 2 ? memcmp(scheduled.ints + 39 + k, floats + k / 2, sizeof(float)) == 0
                        : scheduled.ints[39 + k] == slots[k], "state %d: slot %d holds %d", i, 39 + k,
                  scheduled.ints[39 + k]);
        for (int k = 39; k < HEADER_INTS; k++) CHECK(plain.ints[k] == 0, "the default schedule's slot %d is not 0", k);
        CHECK(state_header_unpack(&scheduled, &back, err) == 0, "state %d refused: %s", i, err);
        state_header_pack(&back, &again);
        CHECK(memcmp(&scheduled, &again, sizeof(again)) == 0, "state %d: read back, it packs to other bytes", i);
        if (test_case_failures) break;
    }
    test_end();
}

static void test_document_slots(void) {
    test_begin("state header: rows aligned to documents in slots 46-47 of version 4, under any optimizer and "
               "schedule, the rest as the unaligned run's");
    Rng rng = {56};
    for (int i = 0; i < 400; i++) {
        TrainingState s = random_state(&rng), back;
        if (i % 2) make_muon(&s, &rng);
        if (i % 4 >= 2) s.schedule = random_schedule(&rng, i % 2, &s.schedule);
        StateFileHeader plain, aligned, again;
        state_header_pack(&s, &plain);
        s.align_documents = 1;
        s.document_token = (int)(rng_next(&rng) % (uint64_t)s.config.V);
        state_header_pack(&s, &aligned);
        char err[ERR_LEN] = "";
        CHECK(aligned.ints[1] == STATE_VERSION_DOCUMENTS && plain.ints[1] != STATE_VERSION_DOCUMENTS,
              "state %d: versions %d and %d", i, plain.ints[1], aligned.ints[1]);
        CHECK(memcmp(plain.ints + 2, aligned.ints + 2, 44 * sizeof(int32_t)) == 0, "state %d: slots 2-45 differ", i);
        CHECK(aligned.ints[46] == 1 && aligned.ints[47] == s.document_token, "state %d: slots 46-47 hold %d %d", i,
              aligned.ints[46], aligned.ints[47]);
        for (int k = 46; k < HEADER_INTS; k++) CHECK(plain.ints[k] == 0, "an unaligned run's slot %d is not 0", k);
        CHECK(state_header_unpack(&aligned, &back, err) == 0, "state %d refused: %s", i, err);
        state_header_pack(&back, &again);
        CHECK(memcmp(&aligned, &again, sizeof(again)) == 0, "state %d: read back, it packs to other bytes", i);
        if (test_case_failures) break;
    }
    test_end();
}

// Muon's variants of a valid Muon state s at random, at least one of them on: the cut of qkvw
// (head pairs where the heads pair), the coefficients, cautious decay (with a decay), NorMuon.
static void random_variants(TrainingState* s, Rng* rng) {
    do {
        s->muon_qkv = (int)(rng_next(rng) % (s->config.NH % 2 ? 2 : 3));
        s->muon_ns = (int)(rng_next(rng) % 2);
        s->cautious_weight_decay = s->weight_decay > 0.0f && rng_next(rng) % 2;
        s->normuon = (int)(rng_next(rng) % 2);
    } while (!s->muon_qkv && !s->muon_ns && !s->cautious_weight_decay && !s->normuon);
    s->normuon_beta2 = s->normuon ? random_float(rng, 0.0f, 0.99f) : 0.0f;
}

// Muon's variants at random under Muon, none under AdamW.
static void random_variants_if(TrainingState* s, Rng* rng, int muon) {
    if (muon) random_variants(s, rng);
}

static void test_muon_variant_slots(void) {
    test_begin("state header: Muon's variants in slots 48-52 of version 5, under any schedule and alignment, the rest "
               "as the run's without them");
    Rng rng = {58};
    for (int i = 0; i < 400; i++) {
        TrainingState s = random_state(&rng), back;
        make_muon(&s, &rng);
        if (i % 2) s.schedule = random_schedule(&rng, 1, &s.schedule);
        if (i % 4 >= 2) {
            s.align_documents = 1;
            s.document_token = (int)(rng_next(&rng) % (uint64_t)s.config.V);
        }
        StateFileHeader plain, varied, again;
        state_header_pack(&s, &plain);
        random_variants(&s, &rng);
        state_header_pack(&s, &varied);
        char err[ERR_LEN] = "";
        CHECK(varied.ints[1] == STATE_VERSION_MUON_VARIANTS && plain.ints[1] != STATE_VERSION_MUON_VARIANTS,
              "state %d: versions %d and %d", i, plain.ints[1], varied.ints[1]);
        CHECK(memcmp(plain.ints + 2, varied.ints + 2, 46 * sizeof(int32_t)) == 0, "state %d: slots 2-47 differ", i);
        const int32_t ints[4] = {s.muon_qkv, s.muon_ns, s.cautious_weight_decay, s.normuon};
        CHECK(memcmp(varied.ints + 48, ints, sizeof(ints)) == 0 &&
              memcmp(varied.ints + 52, &s.normuon_beta2, sizeof(float)) == 0, "state %d: slots 48-52 hold %d %d %d %d %d",
              i, varied.ints[48], varied.ints[49], varied.ints[50], varied.ints[51], varied.ints[52]);
        for (int k = 48; k < HEADER_INTS; k++) CHECK(plain.ints[k] == 0, "a run without variants: slot %d is not 0", k);
        for (int k = 53; k < HEADER_INTS; k++) CHECK(varied.ints[k] == 0, "slot %d is not 0", k);
        CHECK(state_header_unpack(&varied, &back, err) == 0, "state %d refused: %s", i, err);
        state_header_pack(&back, &again);
        CHECK(memcmp(&varied, &again, sizeof(again)) == 0, "state %d: read back, it packs to other bytes", i);
        if (test_case_failures) break;
    }
    test_end();
}

static void test_fp8_slots(void) {
    test_begin("state header: the FP8 settings in slots 53-55 of version 6, under any optimizer, schedule, alignment "
               "and variants, the rest as the run's without them");
    Rng rng = {55};
    for (int i = 0; i < 400; i++) {
        TrainingState s = random_state(&rng), back;
        s.world_size = 1;   // delayed scaling's histories are one rank's
        if (i % 2) make_muon(&s, &rng);
        if (i % 4 >= 2) s.schedule = random_schedule(&rng, i % 2, &s.schedule);
        if (i % 8 >= 4) {
            s.align_documents = 1;
            s.document_token = (int)(rng_next(&rng) % (uint64_t)s.config.V);
        }
        if (i % 16 >= 8 && s.optimizer == OPTIMIZER_MUON) random_variants(&s, &rng);
        StateFileHeader plain, fp8, again;
        state_header_pack(&s, &plain);
        s.fp8 = 1 + (int)(rng_next(&rng) % 3);
        s.fp8_scaling = (int)(rng_next(&rng) % 2);
        s.fp8_grad_bf16 = (int)(rng_next(&rng) % 2);
        state_header_pack(&s, &fp8);
        char err[ERR_LEN] = "";
        CHECK(fp8.ints[1] == STATE_VERSION_FP8 && plain.ints[1] != STATE_VERSION_FP8, "state %d: versions %d and %d", i,
              plain.ints[1], fp8.ints[1]);
        CHECK(memcmp(plain.ints + 2, fp8.ints + 2, 51 * sizeof(int32_t)) == 0, "state %d: slots 2-52 differ", i);
        CHECK(fp8.ints[53] == s.fp8 && fp8.ints[54] == s.fp8_scaling && fp8.ints[55] == s.fp8_grad_bf16,
              "state %d: slots 53-55 hold %d %d %d", i, fp8.ints[53], fp8.ints[54], fp8.ints[55]);
        for (int k = 53; k < HEADER_INTS; k++) CHECK(plain.ints[k] == 0, "a run without FP8: slot %d is not 0", k);
        for (int k = 56; k < HEADER_INTS; k++) CHECK(fp8.ints[k] == 0, "slot %d is not 0", k);
        CHECK(state_header_unpack(&fp8, &back, err) == 0, "state %d refused: %s", i, err);
        state_header_pack(&back, &again);
        CHECK(memcmp(&fp8, &again, sizeof(again)) == 0, "state %d: read back, it packs to other bytes", i);
        if (test_case_failures) break;
    }
    test_end();
}

static void test_init_beta_slots(void) {
    test_begin("state header: nanochat's init and groups' own Adam betas in slots 56-61 of version 7, the rest as the "
               "run's without them");
    Rng rng = {56};
    for (int i = 0; i < 400; i++) {
        TrainingState s = random_state(&rng), back;
        int muon = i % 2, untied = i % 4 >= 2;
        if (muon) make_muon(&s, &rng);
        if (muon && untied) s.head_lr = random_float(&rng, 1e-4f, 1e-2f);
        if (i % 3 == 0) random_variants_if(&s, &rng, muon);
        StateFileHeader plain, own, again;
        state_header_pack(&s, &plain);
        char err[ERR_LEN] = "";
        CHECK(state_header_unpack(&plain, &back, err) == 0, "state %d refused: %s", i, err);
        OptimizerConfig o = training_state_optimizer(&back);
        if (muon)
            CHECK(o.embedding_b1 == s.adam_b1 && o.embedding_b2 == s.adam_b2 && o.head_b1 == s.adam_b1 &&
                  o.head_b2 == s.adam_b2, "state %d: without a record the groups' betas are not the vectors'", i);
        s.init_scheme = muon ? (int)(rng_next(&rng) % 2) : INIT_SCHEME_NANOCHAT;
        if (muon) {
            s.group_betas = s.init_scheme == INIT_SCHEME_DEFAULT || rng_next(&rng) % 2;
            if (s.group_betas) {
                s.embedding_b1 = random_float(&rng, 0.0f, 0.99f);
                s.embedding_b2 = random_float(&rng, 0.0f, 0.99f);
                if (untied) {
                    s.head_b1 = random_float(&rng, 0.0f, 0.99f);
                    s.head_b2 = random_float(&rng, 0.0f, 0.99f);
                }
            }
        }
        state_header_pack(&s, &own);
        CHECK(own.ints[1] == STATE_VERSION_INIT_BETAS && plain.ints[1] != STATE_VERSION_INIT_BETAS,
              "state %d: versions %d and %d", i, plain.ints[1], own.ints[1]);
        CHECK(memcmp(plain.ints + 2, own.ints + 2, 54 * sizeof(int32_t)) == 0, "state %d: slots 2-55 differ", i);
        const int32_t ints[2] = {s.init_scheme, s.group_betas};
        const float betas[4] = {s.embedding_b1, s.embedding_b2, s.head_b1, s.head_b2};
        CHECK(memcmp(own.ints + 56, ints, sizeof(ints)) == 0 && memcmp(own.ints + 58, betas, sizeof(betas)) == 0,
              "state %d: slots 56-61 hold %d %d %d %d %d %d", i, own.ints[56], own.ints[57], own.ints[58], own.ints[59],
              own.ints[60], own.ints[61]);
        for (int k = 53; k < HEADER_INTS; k++) CHECK(plain.ints[k] == 0, "a run without them: slot %d is not 0", k);
        for (int k = 62; k < HEADER_INTS; k++) CHECK(own.ints[k] == 0, "slot %d is not 0", k);
        CHECK(state_header_unpack(&own, &back, err) == 0, "state %d refused: %s", i, err);
        state_header_pack(&back, &again);
        CHECK(memcmp(&own, &again, sizeof(again)) == 0, "state %d: read back, it packs to other bytes", i);
        o = training_state_optimizer(&back);
        if (s.group_betas)
            CHECK(o.embedding_b1 == s.embedding_b1 && o.embedding_b2 == s.embedding_b2 &&
                  (!untied || (o.head_b1 == s.head_b1 && o.head_b2 == s.head_b2)),
                  "state %d: the groups' betas read back are not the recorded ones", i);
        if (test_case_failures) break;
    }
    test_end();
}

// A header changed by change is refused, with one line that holds words.
static void expect_refused(const char* what, const TrainingState* s, void (*change)(StateFileHeader*),
                           const char* words) {
    StateFileHeader h;
    TrainingState back;
    char err[ERR_LEN] = "";
    state_header_pack(s, &h);
    change(&h);
    int rc = state_header_unpack(&h, &back, err);
    CHECK(rc != 0, "%s: accepted", what);
    CHECK(rc == 0 || (strstr(err, words) && !strchr(err, '\n')), "%s: '%s' does not say '%s'", what, err, words);
}

static void to_version_2(StateFileHeader* h) { h->f.version = STATE_VERSION_MUON; }
static void to_version_1(StateFileHeader* h) { h->f.version = STATE_VERSION_ADAMW; }
static void to_version_3(StateFileHeader* h) { h->f.version = STATE_VERSION_SCHEDULE; }
static void to_version_4(StateFileHeader* h) { h->f.version = STATE_VERSION_DOCUMENTS; }
static void to_version_5(StateFileHeader* h) { h->f.version = STATE_VERSION_MUON_VARIANTS; }
static void to_version_6(StateFileHeader* h) { h->f.version = STATE_VERSION_FP8; }
static void to_version_8(StateFileHeader* h) { h->f.version = STATE_VERSION_INIT_BETAS + 1; }
static void fp8_delayed_alone(StateFileHeader* h) { h->f.fp8_scaling = FP8_SCALING_DELAYED; }
static void fp8_delayed_on_ranks(StateFileHeader* h) {
    h->f.fp8_scaling = FP8_SCALING_DELAYED;
    h->f.world_size = 2;
}
static void split_qkv(StateFileHeader* h) { h->f.muon_qkv = MUON_QKV_SPLIT; }
static void head_pairs(StateFileHeader* h) {
    h->f.muon_qkv = MUON_QKV_HEAD_PAIRS;
    h->f.version = STATE_VERSION_MUON_VARIANTS;
}
static void normuon_beta_alone(StateFileHeader* h) {
    h->f.normuon_beta2 = 0.9f;
    h->f.version = STATE_VERSION_MUON_VARIANTS;
}
static void normuon_beta_one(StateFileHeader* h) {
    h->f.normuon = 1;
    h->f.normuon_beta2 = 1.0f;
    h->f.version = STATE_VERSION_MUON_VARIANTS;
}
static void cautious_undecayed(StateFileHeader* h) {
    h->f.cautious_weight_decay = 1;
    h->f.weight_decay = 0.0f;
    h->f.version = STATE_VERSION_MUON_VARIANTS;
}
static void polar_for_adamw(StateFileHeader* h) {
    h->f.muon_ns = NEWTON_SCHULZ_POLAR_EXPRESS;
    h->f.version = STATE_VERSION_MUON_VARIANTS;
}
static void aligned(StateFileHeader* h) { h->f.align_documents = 1; }
static void token_unaligned(StateFileHeader* h) { h->f.document_token = 5; }
static void token_past_vocab(StateFileHeader* h) { h->f.document_token = h->f.shape.V; }
static void wsd(StateFileHeader* h) {
    h->f.lr_schedule = LR_SHAPE_WSD;
    h->f.warmdown_frac = 0.5f;
}
static void no_warmdown(StateFileHeader* h) { h->f.warmdown_frac = 0.0f; }
static void momentum_warmup(StateFileHeader* h) {
    h->f.momentum_warmup_steps = 10;
    h->f.momentum_start = 0.85f;
}
static void momentum_warmup_then_one(StateFileHeader* h) {
    momentum_warmup(h);
    h->f.momentum_start = 1.0f;
}
static void decay_shape_two(StateFileHeader* h) { h->f.weight_decay_schedule = 2; }
static void momentum_given(StateFileHeader* h) { h->f.muon_momentum = 0.9f; }
static void momentum_one(StateFileHeader* h) { h->f.muon_momentum = 1.0f; }
static void no_vector_lr(StateFileHeader* h) { h->f.vector_lr = 0.0f; }
static void optimizer_two(StateFileHeader* h) { h->f.optimizer = 2; }
static void beta_nan(StateFileHeader* h) { h->f.adam_b2 = NAN; }
static void head_lr_given(StateFileHeader* h) { h->f.head_lr = 0.002f; }
static void to_version_7(StateFileHeader* h) { h->f.version = STATE_VERSION_INIT_BETAS; }
static void nanochat_init(StateFileHeader* h) { h->f.init_scheme = INIT_SCHEME_NANOCHAT; }
static void group_betas(StateFileHeader* h) {
    h->f.version = STATE_VERSION_INIT_BETAS;
    h->f.group_betas = 1;
    h->f.embedding_b1 = 0.8f;
    h->f.embedding_b2 = 0.995f;
}
static void betas_without_switch(StateFileHeader* h) {
    group_betas(h);
    h->f.group_betas = 0;
}
static void head_betas_of_a_tied_head(StateFileHeader* h) {
    group_betas(h);
    h->f.head_b1 = 0.8f;
}
static void embedding_beta_one(StateFileHeader* h) {
    group_betas(h);
    h->f.embedding_b2 = 1.0f;
}

static void test_refusals(void) {
    test_begin("state header: an optimizer, schedule, alignment, version and settings that disagree are refused");
    Rng rng = {7};
    TrainingState adamw = random_state(&rng), muon = adamw;
    make_muon(&muon, &rng);
    expect_refused("AdamW as version 2", &adamw, to_version_2, "the version is not the optimizer's");
    expect_refused("Muon as version 1", &muon, to_version_1, "the version is not the optimizer's");
    expect_refused("version 8", &adamw, to_version_8, "unsupported training state version 8");
    TrainingState fp8 = muon;
    fp8.fp8 = FP8_MLP | FP8_HEAD;
    fp8.world_size = 1;
    expect_refused("no FP8 as version 6", &adamw, to_version_6, "the version is not FP8's");
    expect_refused("FP8 as version 2", &fp8, to_version_2, "the version is not FP8's");
    expect_refused("FP8's scaling without FP8", &adamw, fp8_delayed_alone, "FP8's settings without --fp8");
    expect_refused("delayed FP8 scaling on two ranks", &fp8, fp8_delayed_on_ranks,
                   "delayed FP8 scaling on several ranks");
    expect_refused("no variants as version 5", &muon, to_version_5, "the version is not that of Muon's variants");
    expect_refused("q, k and v as version 2", &muon, split_qkv, "the version is not that of Muon's variants");
    expect_refused("AdamW with Polar Express", &adamw, polar_for_adamw, "an AdamW run with Muon's settings");
    expect_refused("NorMuon's beta without NorMuon", &muon, normuon_beta_alone,
                   "--normuon-beta2 without --normuon has no effect");
    expect_refused("NorMuon's beta 1", &muon, normuon_beta_one, "--normuon-beta2 1 must be in [0, 1)");
    TrainingState undecayed = muon;
    expect_refused("cautious decay without a decay", &undecayed, cautious_undecayed,
                   "--cautious-weight-decay without --weight-decay has no effect");
    TrainingState odd = muon;
    odd.config.NH = 3;
    odd.config.C = 3 * 64;
    expect_refused("head pairs of 3 heads", &odd, head_pairs, "--muon-qkv head-pairs: the model's heads are an odd count");
    expect_refused("unaligned rows as version 4", &adamw, to_version_4, "the version is not the rows' alignment's");
    expect_refused("aligned rows as version 1", &adamw, aligned, "the version is not the rows' alignment's");
    TrainingState documents = muon;
    documents.align_documents = 1;
    documents.document_token = 3;
    expect_refused("aligned rows as version 2", &documents, to_version_2, "the version is not the rows' alignment's");
    expect_refused("a document token without aligned rows", &adamw, token_unaligned,
                   "the document token is set without --align-documents, or outside the vocabulary");
    expect_refused("a document token past the vocabulary", &documents, token_past_vocab,
                   "the document token is set without --align-documents, or outside the vocabulary");
    expect_refused("the default schedule as version 3", &adamw, to_version_3, "the version is not the schedule's");
    expect_refused("wsd as version 1", &adamw, wsd, "the version is not the schedule's");
    expect_refused("AdamW with a momentum", &adamw, momentum_given, "an AdamW run with Muon's settings");
    expect_refused("AdamW with a head lr", &adamw, head_lr_given, "an AdamW run with Muon's settings");
    expect_refused("Muon with momentum 1", &muon, momentum_one, "--muon-momentum 1 must be in [0, 1)");
    expect_refused("Muon without a vector lr", &muon, no_vector_lr, "--vector-lr 0 must be > 0");
    expect_refused("optimizer 2", &adamw, optimizer_two, "--optimizer 2 is out of range");
    expect_refused("a NaN beta", &muon, beta_nan, "--adam-beta2 nan is out of range");
    TrainingState scheduled = muon;
    scheduled.schedule.lr_shape = LR_SHAPE_WSD;
    scheduled.schedule.warmdown_frac = 0.65f;
    expect_refused("wsd without a warm-down", &scheduled, no_warmdown, "--warmdown-frac 0 must be in (0, 1]");
    expect_refused("a momentum warm-up from 1", &scheduled, momentum_warmup_then_one,
                   "--momentum-start 1 must be in [0, 1)");
    expect_refused("weight decay schedule 2", &scheduled, decay_shape_two, "--weight-decay-schedule 2 is out of range");
    adamw.schedule = scheduled.schedule;
    expect_refused("AdamW with a momentum warm-up", &adamw, momentum_warmup,
                   "--momentum-warmup-steps is a setting of --optimizer muon");
    const char* version_7 = "the version is not that of the init and the groups' betas";
    expect_refused("neither init nor betas as version 7", &muon, to_version_7, version_7);
    expect_refused("nanochat's init as version 1", &adamw, nanochat_init, version_7);
    expect_refused("AdamW with the groups' betas", &adamw, group_betas, "an AdamW run with Muon's settings");
    expect_refused("the groups' betas without their switch", &muon, betas_without_switch,
                   "the groups' betas are set without their switch");
    expect_refused("the head's betas of a tied head", &muon, head_betas_of_a_tied_head,
                   "the head's betas are set without an untied head");
    expect_refused("an embedding beta of 1", &muon, embedding_beta_one, "--embedding-beta2 1 must be in [0, 1)");
    test_end();
}

// The int fields compared as integers: the counts up to 2^31 - 1 read back whole (a float holds
// 2^31 - 1 as 2^31); each field one below its least value refused naming it; an Adam step past
// the step, and a weight decay that erases the weights at the peak, refused.
static void test_int_bounds(void) {
    test_begin("state header: int fields up to 2^31 - 1 read back, each below its bounds refused by name");
    Rng rng = {31};
    TrainingState top = random_state(&rng);
    top.B = top.T = top.grad_accum = 1;
    top.config.maxT = 64;
    top.steps = top.schedule.warmup_steps = top.classifier_rows = top.world_size = INT_MAX;
    const int steps[3] = {0, INT_MAX - 1, INT_MAX};
    for (int i = 0; i < 3; i++) {
        TrainingState s = top, back;
        s.step = s.adam_t = steps[i];
        StateFileHeader h, again;
        char err[ERR_LEN] = "";
        state_header_pack(&s, &h);
        CHECK(state_header_unpack(&h, &back, err) == 0, "steps %d, step %d: refused: %s", s.steps, s.step, err);
        state_header_pack(&back, &again);
        CHECK(memcmp(&h, &again, sizeof(h)) == 0, "step %d: read back, it packs to other bytes", s.step);
    }
    const struct {
        const char* name;
        int* field;
        int below;
    } ints[] = {{"step", &top.step, -1}, {"-B", &top.B, 0}, {"-T", &top.T, 0}, {"micro-steps", &top.grad_accum, 0},
                {"--warmup-steps", &top.schedule.warmup_steps, -1}, {"--steps", &top.steps, 0},
                {"optimizer step", &top.adam_t, -1}, {"--attention", &top.attention, -1},
                {"--deterministic", &top.deterministic, 2}, {"--recompute", &top.recompute, 4},
                {"--classifier-chunk", &top.classifier_rows, 0}, {"ranks", &top.world_size, -1},
                {"--optimizer", &top.optimizer, 2}, {"--lr-schedule", &top.schedule.lr_shape, 2},
                {"--momentum-warmup-steps", &top.schedule.momentum_warmup_steps, -1},
                {"--momentum-cooldown-steps", &top.schedule.momentum_cooldown_steps, -1},
                {"--weight-decay-schedule", &top.schedule.decay_shape, -1},
                {"--align-documents", &top.align_documents, 2}, {"--align-documents at token", &top.document_token, -1},
                {"--muon-qkv", &top.muon_qkv, -1}, {"--muon-qkv", &top.muon_qkv, 3}, {"--muon-ns", &top.muon_ns, 2},
                {"--cautious-weight-decay", &top.cautious_weight_decay, 2}, {"--normuon", &top.normuon, -1},
                {"--fp8", &top.fp8, -1}, {"--fp8", &top.fp8, 4}, {"--fp8-scaling", &top.fp8_scaling, 2},
                {"--fp8-grad", &top.fp8_grad_bf16, -1},

                {"--init", &top.init_scheme, 2}, {"--init", &top.init_scheme, -1},
                {"groups' own Adam betas", &top.group_betas, 2}};
    top.step = top.adam_t = 7;
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
        int kept = *ints[i].field;
        *ints[i].field = ints[i].below;
        StateFileHeader h;
        TrainingState back;
        char err[ERR_LEN] = "", words[64];
        state_header_pack(&top, &h);
        snprintf(words, sizeof(words), "%s %d is out of range", ints[i].name, ints[i].below);
        int rc = state_header_unpack(&h, &back, err);
        CHECK(rc != 0 && strstr(err, words), "%s %d: %s", ints[i].name, ints[i].below, rc ? err : "accepted");
        *ints[i].field = kept;
    }
    TrainingState s = top, back;
    StateFileHeader h;
    char err[ERR_LEN] = "";
    s.adam_t = s.step + 1;
    state_header_pack(&s, &h);
    CHECK(state_header_unpack(&h, &back, err) != 0 && strstr(err, "the step counts"), "an Adam step past the step: %s",
          err);
    s = top;
    s.lr = 0.5f;
    s.weight_decay = 2.0f;
    state_header_pack(&s, &h);
    CHECK(state_header_unpack(&h, &back, err) != 0 && strstr(err, "--weight-decay 2: times --lr 0.5"),
          "a decay of lr * 2 = 1: %s", err);
    test_end();
}

// Every slot past the fields zero, as in the model header: a value in any is refused, naming it.
static void test_unused_slots(void) {
    test_begin("state header: a slot past the fields set is refused, naming it");
    Rng rng = {39};
    TrainingState s = random_state(&rng), back;
    make_muon(&s, &rng);
    for (int slot = (int)(sizeof(StateSlots) / sizeof(int32_t)); slot < HEADER_INTS; slot++) {
        StateFileHeader h;
        char err[ERR_LEN] = "", words[64];
        state_header_pack(&s, &h);
        h.ints[slot] = slot % 2 ? 1 : INT_MIN;
        snprintf(words, sizeof(words), "slot %d holds %d", slot, h.ints[slot]);
        CHECK(state_header_unpack(&h, &back, err) != 0 && strstr(err, words), "slot %d set: %s", slot, err);
        if (test_case_failures) break;
    }
    test_end();
}

int main(void) {
    test_adamw_layout();
    test_muon_slots();
    test_schedule_slots();
    test_document_slots();
    test_muon_variant_slots();
    test_fp8_slots();
    test_init_beta_slots();
    test_refusals();
    test_int_bounds();
    test_unused_slots();
    return test_exit_code();
}
