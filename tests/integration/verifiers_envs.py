"""verifiers environments written with verifiers' own API on in-memory datasets, loaded by flywheel's
``verifiers`` environment (``task.env_args.load: "verifiers_envs:<function>"``)."""

import verifiers as vf
from datasets import Dataset

ADDER_ROWS = [(12, 34), (123, 456), (5, 7), (250, 250), (99, 1), (7, 8)]
PRODUCT_ROWS = [(12, 34), (347, 582), (25, 4), (999, 111), (123, 321), (604, 17)]


def exact_answer(completion, answer, parser) -> float:
    """1 when the last assistant message, stripped, is the answer."""
    return 1.0 if (parser.parse_answer(completion) or "") == answer else 0.0


def digits_only(completion, parser) -> float:
    """1 when the last assistant message is a number alone."""
    return 1.0 if (parser.parse_answer(completion) or "").isdigit() else 0.0


def used_a_tool(completion) -> float:
    """1 when a tool answered during the episode."""
    return 1.0 if any(message.role == "tool" for message in completion) else 0.0


def calculate(expression: str) -> str:
    """Multiplies two integers.

    Args:
        expression: two integers joined by *, e.g. 347*582
    """
    left, right = expression.split("*")
    return str(int(left) * int(right))


def adder() -> vf.SingleTurnEnv:
    """The quickstart's sums (``12+34=``): exact answer (weight 1) and digits only (weight 0.25)."""
    rows = [{"question": f"{a}+{b}=", "answer": str(a + b)} for a, b in ADDER_ROWS]
    parser = vf.Parser(extract_fn=str.strip)
    rubric = vf.Rubric(funcs=[exact_answer, digits_only], weights=[1.0, 0.25], parser=parser)
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows[:4]), eval_dataset=Dataset.from_list(rows[4:]), parser=parser, rubric=rubric)


def products() -> vf.ToolEnv:
    """``What is 347*582?`` with a ``calculate`` tool, up to 3 turns: exact answer (1) and tool use (0.2)."""
    rows = [{"question": f"What is {a}*{b}?", "answer": str(a * b)} for a, b in PRODUCT_ROWS]
    parser = vf.Parser(extract_fn=str.strip)
    rubric = vf.Rubric(funcs=[exact_answer, used_a_tool], weights=[1.0, 0.2], parser=parser)
    return vf.ToolEnv(dataset=Dataset.from_list(rows), tools=[calculate], max_turns=3, parser=parser, rubric=rubric)


class Feedback(vf.MultiTurnEnv):
    """Says "wrong, try again" until the answer is right or the turns run out."""

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs) -> vf.Messages:
        return [vf.UserMessage(content="wrong, try again")]

    @vf.stop
    async def answered(self, state: vf.State) -> bool:
        return bool(state["trajectory"]) and state["trajectory"][-1]["completion"][-1].content.strip() == state["answer"]


def feedback(system_prompt: str | None = None) -> Feedback:
    """The sums with feedback after a wrong answer, up to 3 turns, exact answer scored."""
    rows = [{"question": f"{a}+{b}=", "answer": str(a + b)} for a, b in ADDER_ROWS]
    parser = vf.Parser(extract_fn=str.strip)
    rubric = vf.Rubric(funcs=[exact_answer], parser=parser)
    return Feedback(dataset=Dataset.from_list(rows), max_turns=3, system_prompt=system_prompt, parser=parser, rubric=rubric)


def few_shot() -> vf.SingleTurnEnv:
    """A prompt with an example exchange before the question (not supported by flywheel's adapter)."""
    rows = [{"question": f"{a}+{b}=", "answer": str(a + b)} for a, b in ADDER_ROWS]
    example = [{"role": "user", "content": "1+1="}, {"role": "assistant", "content": "2"}]
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), few_shot=example, rubric=vf.Rubric(funcs=[digits_only]))
