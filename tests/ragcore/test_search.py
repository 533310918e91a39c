from ragcore import Document, FusionConfig, Index, SearchConfig, search


def _ids(result):
    return [h.doc_id for h in result.hits]


def test_mmr_moves_a_near_duplicate_below_a_different_relevant_document(tmp_path, cached_minilm):
    docs = [
        Document(
            "restart-a",
            "Restart the daemon",
            "To restart the memory daemon, run memory-agent stop.",
        ),
        Document(
            "restart-b",
            "Restarting the daemon",
            "To restart the memory daemon run memory-agent stop!",
        ),
        Document(
            "logs",
            "Daemon logs",
            "The memory daemon writes its log to run/daemon.log; read it to debug a restart.",
        ),
        Document("other", "Release process", "Tag, build wheels, upload."),
    ]
    index = Index(tmp_path / "index", cached_minilm)
    index.build(docs)
    plain = _ids(search(index, "restart the memory daemon", limit=3))
    assert set(plain[:2]) == {"restart-a", "restart-b"}
    diverse = _ids(
        search(index, "restart the memory daemon", limit=3, config=SearchConfig(mmr_lambda=0.5))
    )
    assert diverse[0] in {"restart-a", "restart-b"} and diverse[1] == "logs"


def test_a_document_scores_as_its_best_chunk_and_shows_that_chunk(tmp_path, cached_minilm):
    body = (
        "# Setup\n\n"
        + "Install the package with pip. " * 30
        + "\n\n# Troubleshooting\n\nIf the socket file is stale, delete run/daemon.sock."
    )
    index = Index(tmp_path / "index", cached_minilm, max_chars=200)
    index.build([Document("guide", "Guide", body), Document("x", "Unrelated", "Bananas.")])
    hit = search(index, "stale socket file", limit=1).hits[0]
    assert hit.doc_id == "guide" and hit.heading == "Troubleshooting"
    assert "stale" in hit.snippet


def test_lexical_only_search_says_it_is_degraded(tmp_path, cached_minilm):
    index = Index(tmp_path / "index", cached_minilm)
    index.build([Document("a", "Alpha", "alpha beta"), Document("b", "Gamma", "gamma delta")])
    calls = cached_minilm.stats.model_calls
    result = search(index, "gamma", use_dense=False)
    assert _ids(result) == ["b"] and result.degraded.startswith("model loading")
    assert cached_minilm.stats.model_calls == calls  # the model was not asked


def test_score_fusion_keeps_lexical_order_when_the_dense_channel_is_flat(tmp_path, cached_minilm):
    # MiniLM barely understands Chinese: the lexical channel must carry these queries.
    docs = [
        Document(f"zh{i}", t, b)
        for i, (t, b) in enumerate(
            [
                ("泡泡战士", "玩家以水枪、小枪、锤子或是水炸弹泡封敌人，生命数耗完即算为踢爆。"),
                ("长城", "长城是中国古代的军事防御工程，修筑的历史可上溯到西周时期。"),
                ("黄河", "黄河是中国第二长河，发源于青藏高原巴颜喀拉山北麓。"),
                ("熊猫", "大熊猫是中国特有物种，主要栖息于四川、陕西和甘肃的山区。"),
            ]
        )
    ]
    index = Index(tmp_path / "index", cached_minilm)
    index.build(docs)
    for query, expected in [
        ("玩家用什么泡封敌人", "zh0"),
        ("黄河发源于哪里", "zh2"),
        ("大熊猫栖息在哪些省份", "zh3"),
    ]:
        assert _ids(search(index, query, limit=1)) == [expected]
        rrf = search(index, query, limit=4, config=SearchConfig(fusion=FusionConfig("rrf")))
        assert expected in _ids(rrf)


def test_explain_reports_rank_score_and_contribution_per_channel(tmp_path, cached_minilm):
    index = Index(tmp_path / "index", cached_minilm)
    index.build(
        [
            Document("a", "Socket permissions", "The socket is created with mode 0600."),
            Document("b", "Logs", "Logs go to stderr."),
        ]
    )
    result = search(index, "socket mode", limit=2)
    top = result.hits[0].explain()
    assert top["channels"]["lexical"]["rank"] == 1 and top["channels"]["dense"]["rank"] == 1
    assert abs(sum(result.weights.values()) - 1.0) < 1e-9
    assert result.timings_ms["total"] > 0
