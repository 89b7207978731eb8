"""The whole-pack answer's item model (packs/retrieval/whole_pack_rank.py): its shipped
weights, its features and how it picks."""

import json

import numpy as np
import pytest

from packs.retrieval import whole_pack_rank as rank
from packs.retrieval.whole_pack_items import Item, Sec

QUESTION = "Which DNS policies can a Pod use?"


def _item(name: str, sentence: str, score: float, etype: str = "", sid: str = "s1") -> Item:
    sec = Sec("a1", sid, "https://x/dns.md", "DNS", "DNS > Policies", sentence, 0)
    return Item(name, sec, 0, len(sentence), score, etype=etype)


def test_the_shipped_weights_load_and_name_their_version():
    model = rank.load()
    assert model.version.startswith("items-") and "/" in model.version
    assert model.model.features == rank.FEATURES
    assert model.model.weights.shape == (len(rank.FEATURES),)
    assert 0 <= model.limits.alpha < 1 and model.limits.max_items > 0


def test_weights_for_other_features_are_refused_with_what_to_do(tmp_path):
    raw = json.loads(rank.WEIGHTS_FILE.read_text())
    raw["features"] = raw["features"][:-1]
    path = tmp_path / "w.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(rank.ItemWeightsError, match="train_items.py"):
        rank.load.__wrapped__(path)
    with pytest.raises(rank.ItemWeightsError, match="cannot read"):
        rank.load.__wrapped__(tmp_path / "missing.json")


def test_features_read_the_question_the_quote_and_what_is_already_said():
    items = [_item("ClusterFirst", "The ClusterFirst DNS policy sends queries to the "
                   "cluster's DNS service.", 4.0, "setting"),
             _item("Default", "With Default the Pod inherits the node's DNS resolution.", 1.0,
                   "setting", "s2")]
    items[1].typed = True  # a page writes "the Default policy" (whole_pack_beyond.py)
    x = rank.features(items, QUESTION, "list", "With Default the Pod inherits the node's DNS "
                      "resolution.", {"s1": 0.7, "s2": 0.2})
    f = {name: x[:, k] for k, name in enumerate(rank.FEATURES)}
    assert x.shape == (2, len(rank.FEATURES))
    assert f["lscore"][0] == 0.0 and f["lscore"][1] < 0  # a share of the best's score
    assert list(f["head_quote"]) == [1.0, 0.0]  # "policy" is the noun asked for
    assert list(f["quote_above"]) == [0.0, 1.0]  # the passages above quote the second
    assert list(f["ssim"]) == [0.7, 0.2]
    assert list(f["typed"]) == [0.0, 1.0]
    assert f["asked"][0] > 0 and f["across"][0] == 0.0


def test_pick_orders_by_probability_and_keeps_to_its_limits():
    model = rank.load()
    said = "Kubernetes supports these DNS policies for a Pod."
    items = [_item(f"Policy{k}", f"The Policy{k} DNS policy applies to a Pod.", 1.0, sid=f"s{k}")
             for k in range(30)]
    items.append(_item("Said", said, 1.0, sid="said"))
    chosen, more = rank.pick(model, items, QUESTION, "list", said, {})
    assert 0 < len(chosen) <= model.limits.max_items
    p = model.probability(rank.features(chosen, QUESTION, "list", said, {}))
    assert all(p >= model.limits.alpha * p.max() - 1e-12)
    # What the passages above already quote is no item worth listing ahead of new ones.
    assert chosen[0].name != "Said"
    # The next most probable items, none of them listed, come after as the less likely.
    assert len(more) == min(model.limits.more, len(items) - len(chosen))
    assert not {i.name for i in more} & {i.name for i in chosen}
    p_all = dict(zip((i.name for i in items),
                     model.probability(rank.features(items, QUESTION, "list", said, {}))))
    assert max(p_all[i.name] for i in more) <= min(p_all[i.name] for i in chosen)
    assert rank.pick(model, [], QUESTION, "list", "", {}) == ([], [])


def test_a_strict_alpha_keeps_only_the_items_near_the_best():
    model = rank.load()
    strict = rank.ItemModel(model.model, model.bias, rank.Limits(max_items=20, alpha=1.0),
                            model.version)
    items = [_item("ClusterFirst", "The ClusterFirst DNS policy is the default for a Pod.",
                   5.0, "setting"),
             _item("web", "kubectl apply -f web.yaml", 0.2, "code", "s2")]
    chosen, more = rank.pick(strict, items, QUESTION, "list", "", {"s1": 0.8, "s2": 0.1})
    assert [i.name for i in chosen] == ["ClusterFirst"]
    assert [i.name for i in more] == ["web"]  # named after the list, not left out
    m = strict.model
    assert np.isclose(strict.probability(np.zeros((1, len(rank.FEATURES))))[0],
                      1 / (1 + np.exp(-(strict.bias - (m.mean / m.scale) @ m.weights))))
