#!/usr/bin/env bash
# Entrypoint of the GPU trainer image (docker/trainer.Dockerfile).
#
#   train [FLAGS...]   (default) GTPO training with OpenRLHF on this node: `gtpo-openrlhf` with
#                      the paper's setup, read from GTPO_* environment variables (below); FLAGS
#                      are appended, so any OpenRLHF or --gtpo.* flag can be added or overridden.
#                      With GTPO_NUM_NODES > 1 this node first starts the Ray head.
#   ray-worker         join the Ray cluster at GTPO_RAY_HEAD (host:port) and stay in the
#                      foreground (run on every other node of a multi-node job).
#   print-command      print the `gtpo-openrlhf` command `train` would run, and exit.
#   anything else      run as a command (bash, gtpo-openrlhf --help, ray status, ...).
#
# Environment (defaults: the paper's single-node setup, Qwen2.5-3B-Instruct, G = 8):
#   GTPO_MODEL (Qwen/Qwen2.5-3B-Instruct)  GTPO_DATASET (/data/gsm8k_train.jsonl)
#   GTPO_INPUT_KEY (prompt) GTPO_LABEL_KEY (label)  GTPO_ALGO (gtpo | grpo)  GTPO_GAMMA (0.1)
#   GTPO_N_SAMPLES (G, 8)  GTPO_LR (1e-6)  GTPO_TEMPERATURE (1.0)  GTPO_KL_COEF (0; grpo only)
#   GTPO_ROLLOUT_BATCH_SIZE (16)  GTPO_TRAIN_BATCH_SIZE (rollout batch x G: one policy
#   iteration per batch)  GTPO_ROLLOUT_MICRO_BATCH_SIZE (8)  GTPO_TRAIN_MICRO_BATCH_SIZE (4)
#   GTPO_MAX_NEW_TOKENS (512)  GTPO_MAX_LEN (1024)  GTPO_NUM_NODES (1)
#   GTPO_GPUS_PER_NODE (visible GPUs)  GTPO_VLLM_TP (1)  GTPO_VLLM_MEMORY (0.6)  GTPO_REWARD_URL
#   GTPO_RUN_NAME  GTPO_CKPT_DIR (/ckpt)  GTPO_OUTPUT_DIR (/outputs)  GTPO_SAVE_STEPS (50)
#   GTPO_RAY_HEAD (host:6379, ray-worker)  GTPO_NODE_IP (the head's cluster address: Ray and
#   its job server bind it; default: the first of `hostname -I`)  WANDB_API_KEY (turns W&B on)
#   GTPO_EXTRA_ARGS (more flags, split on whitespace)
set -euo pipefail

die() { echo "trainer: $*" >&2; exit 2; }

show_command() {  # the command, shell-quoted, with the W&B key masked
  printf '%q ' "${CMD[@]}" | sed 's/--logger.wandb.key [^ ]*/--logger.wandb.key ***/'
  echo
}

gpus_per_node() {
  if [ -n "${GTPO_GPUS_PER_NODE:-}" ]; then
    echo "$GTPO_GPUS_PER_NODE"
  elif command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L | grep -c '^GPU' || true
  else
    echo 0
  fi
}

node_ip() {  # the address the other nodes reach this one at: GTPO_NODE_IP, else the first
  # address `hostname -I` lists (on a host with several networks, set GTPO_NODE_IP)
  if [ -n "${GTPO_NODE_IP:-}" ]; then echo "$GTPO_NODE_IP"; else
    { hostname -I 2>/dev/null || true; } | awk '{print $1}'; fi
}

positive_int() {  # name value
  case "$2" in '' | *[!0-9]* | 0) die "$1 must be a positive integer, got '$2'" ;; esac
}

train_command() {
  local gpus nodes tp samples rollout_bs train_bs run
  gpus=$(gpus_per_node)
  [ "$gpus" -gt 0 ] 2>/dev/null || die "no GPU visible (nvidia-smi -L); run with GPUs \
(compose profile gpu reserves them) or set GTPO_GPUS_PER_NODE"
  nodes=${GTPO_NUM_NODES:-1}
  tp=${GTPO_VLLM_TP:-1}
  samples=${GTPO_N_SAMPLES:-8}
  rollout_bs=${GTPO_ROLLOUT_BATCH_SIZE:-16}
  for v in gpus nodes tp samples rollout_bs; do positive_int "$v" "${!v}"; done
  [ $((gpus * nodes % tp)) = 0 ] || die "GTPO_VLLM_TP=$tp must divide the $((gpus * nodes)) GPUs"
  train_bs=${GTPO_TRAIN_BATCH_SIZE:-$((rollout_bs * samples))}
  run=${GTPO_RUN_NAME:-${GTPO_ALGO:-gtpo}-g${samples}}

  CMD=(
    gtpo-openrlhf
    --actor.model_name_or_path "${GTPO_MODEL:-Qwen/Qwen2.5-3B-Instruct}"
    --data.prompt_dataset "${GTPO_DATASET:-/data/gsm8k_train.jsonl}"
    --data.input_key "${GTPO_INPUT_KEY:-prompt}" --data.label_key "${GTPO_LABEL_KEY:-label}"
    --data.apply_chat_template
    --reward.remote_url "${GTPO_REWARD_URL:-http://127.0.0.1:8000/get_reward}"
    # The paper's group_norm advantages (dr_grpo through GTPO_EXTRA_ARGS, which come later and
    # win); no KL term (the launcher refuses others).
    --algo.advantage.estimator group_norm --algo.kl.init_coef "${GTPO_KL_COEF:-0}"
    --rollout.n_samples_per_prompt "$samples" --rollout.batch_size "$rollout_bs"
    --train.batch_size "$train_bs"
    --rollout.micro_batch_size "${GTPO_ROLLOUT_MICRO_BATCH_SIZE:-8}"
    --train.micro_batch_size "${GTPO_TRAIN_MICRO_BATCH_SIZE:-4}"
    --rollout.temperature "${GTPO_TEMPERATURE:-1.0}"
    --rollout.max_new_tokens "${GTPO_MAX_NEW_TOKENS:-512}" --data.max_len "${GTPO_MAX_LEN:-1024}"
    --actor.adam.lr "${GTPO_LR:-1e-6}" --actor.loss_agg_mode seq-mean-token-mean
    --actor.num_nodes "$nodes" --actor.num_gpus_per_node "$gpus"
    # The reference model (only with a KL term, GTPO_ALGO=grpo) shares the policy's GPUs under
    # --train.colocate_all, and OpenRLHF asserts it spans the same nodes (its default: 1 x 8).
    --ref.num_nodes "$nodes" --ref.num_gpus_per_node "$gpus"
    --vllm.num_engines "$((gpus * nodes / tp))" --vllm.tensor_parallel_size "$tp"
    # vLLM's share of each GPU while it generates: the policy's weights stay beside it through
    # sleep mode (the launcher checks both phases against the GPU's memory).
    --vllm.gpu_memory_utilization "${GTPO_VLLM_MEMORY:-0.6}"
    --train.colocate_all --vllm.enable_sleep --ds.enable_sleep
    --ds.zero_stage 2 --ds.param_dtype bf16 --actor.gradient_checkpointing_enable
    --gtpo.algo "${GTPO_ALGO:-gtpo}" --gtpo.gamma "${GTPO_GAMMA:-0.1}"
    --ckpt.path "${GTPO_CKPT_DIR:-/ckpt}/$run" --ckpt.save_steps "${GTPO_SAVE_STEPS:-50}"
    --ckpt.output_dir "${GTPO_OUTPUT_DIR:-/outputs}/$run"
    --logger.tensorboard_dir "${GTPO_OUTPUT_DIR:-/outputs}/runs"
  )
  if [ -n "${WANDB_API_KEY:-}" ]; then
    # A run name asks for W&B and the launcher takes the key from WANDB_API_KEY: never on the
    # command line, which ps and the logs show.
    CMD+=(--logger.wandb.run_name "$run")
  fi
  # shellcheck disable=SC2206  # word splitting of the extra flags is the point
  CMD+=(${GTPO_EXTRA_ARGS:-} "$@")
}

mode=${1:-train}
case "$mode" in
  train | --*)
    [ "$mode" = train ] && shift
    train_command "$@"
    if [ "${GTPO_NUM_NODES:-1}" -gt 1 ]; then
      # The head also trains; workers join with `ray-worker`. OpenRLHF's ray.init() attaches to
      # the running cluster and its placement groups wait until every node's GPUs have joined.
      # Ray's job server (port 8265, on the dashboard's address) runs whatever job it is sent
      # and has no authentication: it listens on the cluster address only, never on every
      # interface. Whoever reaches that address and port can submit a job.
      ip=$(node_ip)
      [ -n "$ip" ] || die "set GTPO_NODE_IP to this node's address on the cluster network"
      ray start --head --port 6379 --node-ip-address "$ip" --dashboard-host "$ip" \
        --num-gpus "$(gpus_per_node)"
    fi
    echo "trainer: $(show_command)" >&2
    exec "${CMD[@]}"
    ;;
  print-command)
    shift
    train_command "$@"
    show_command
    ;;
  ray-worker)
    [ -n "${GTPO_RAY_HEAD:-}" ] || die "set GTPO_RAY_HEAD to the head node's host:6379"
    exec ray start --address "$GTPO_RAY_HEAD" --num-gpus "$(gpus_per_node)" --block
    ;;
  *)
    exec "$@"
    ;;
esac
