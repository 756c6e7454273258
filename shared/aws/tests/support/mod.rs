//! What the adapters' tests against moto and the local Bedrock server share: a store that reaches a fresh table
//! through a fault proxy, the calls each turn of a chat service makes through it, and the Bedrock model on a local
//! server.

// Each test file that includes it uses only some of it.
#![allow(dead_code)]

use aws_sdk_dynamodb::Client;
use chat_aws::{BedrockModel, DynamoStore};
use chat_core::{Answer, Caller, ChatService, SessionStore, StoreTimeouts, StoredMessage};
use chat_testing::contract::{seed, turn};
use chat_testing::{Script, ScriptedModel, ask};
use local_bedrock::LocalBedrock;
use local_dynamodb::LocalDynamo;
use local_dynamodb::fault_proxy::FaultProxy;

/// A local Bedrock server and the adapter's model reaching it through the real SDK client (ten seconds a call).
pub async fn start_bedrock() -> (LocalBedrock, BedrockModel) {
    let server = LocalBedrock::start().await.expect("the server starts");
    let model = BedrockModel::new(
        &server.sdk_config().await,
        std::time::Duration::from_secs(10),
    );
    (server, model)
}

/// A fresh table; a store that reaches it through a fault proxy (with `timeouts`), and one that reaches it
/// directly, to see what landed; with a client of the table and its name, to write and count items as they are.
pub async fn behind_proxy(
    timeouts: StoreTimeouts,
) -> (DynamoStore, DynamoStore, FaultProxy, (Client, String)) {
    let (client, table) = LocalDynamo::shared().fresh_table().await;
    let proxy = FaultProxy::start(&LocalDynamo::shared().endpoint())
        .await
        .unwrap();
    let sdk = LocalDynamo::sdk_config_at(&proxy.endpoint()).await;
    (
        DynamoStore::from_config(&sdk, &table, None, timeouts),
        DynamoStore::new(client.clone(), table.clone(), None),
        proxy,
        (client, table),
    )
}

/// `n` turns of alice's in one chat, the first starting it, turn `i` asking "question {i}" and answered with
/// `script(i)`: what each turn called through `proxy` (its operations, joined by spaces), and its answer.
pub async fn turns_through<S: SessionStore>(
    service: &ChatService<ScriptedModel, S>,
    model: &ScriptedModel,
    proxy: &FaultProxy,
    n: usize,
    script: impl Fn(usize) -> Script,
) -> Vec<(String, Answer)> {
    let alice = Caller::owner("alice");
    let mut turns = Vec::new();
    let mut chat_id: Option<String> = None;
    for turn in 0..n {
        model.push(script(turn));
        let before = proxy.operations().len();
        let question = ask(&format!("question {turn}"), chat_id.as_deref());
        let answer = service.answer(&alice, &question).await.unwrap();
        chat_id = answer
            .session_state
            .as_ref()
            .and_then(|s| s.as_str().map(str::to_string));
        turns.push((proxy.operations()[before..].join(" "), answer));
    }
    turns
}

/// Alice's chat `name` (see chat-testing's contract), made with one turn: the question `q0` and its answer `a0`.
pub async fn chat_of_one_turn(store: &DynamoStore, name: &str) -> [StoredMessage; 2] {
    let first = turn("q0", "a0");
    seed(store, "alice", name, &first).await;
    first
}
