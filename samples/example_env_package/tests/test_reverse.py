import gymnasium
from gymnasium.utils.env_checker import check_env
from rankgym_reverse.env import ENV_ID, register_envs

import rankgym.envs  # noqa: F401  (registers installed plugins)


def test_reverse_env():
    register_envs()
    env = gymnasium.make(ENV_ID).unwrapped
    check_env(env)
    for split in ("train", "test"):
        for task in env.tasks(split):
            env.reset(options={"task_id": task.id})
            for message in env.oracle(task):
                _, reward, terminated, _, info = env.step(message)
            assert terminated and reward == 1.0, task.id
    env.reset(options={"task_id": "reverse-planet"})
    assert env.step("tenalp")[1] == 0.0  # a plain-text reply is not a submission
